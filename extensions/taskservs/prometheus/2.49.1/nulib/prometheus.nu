# Prometheus 2 task service: durations, prometheus.yml and the install plan.

const UNITS = {ms: 0.001, s: 1, m: 60, h: 3600, d: 86400, w: 604800, y: 31536000}

export def prometheus-defaults []: nothing -> record {
    {
        version: "2.49.1"
        arch: "amd64"
        listen: "0.0.0.0:9090"
        storage_path: "/var/lib/prometheus"
        retention_time: "15d"
        retention_size: ""
        scrape_interval: "30s"
        scrape_timeout: "10s"
        evaluation_interval: "30s"
        external_labels: {}
        alertmanagers: []
        rule_files: []
        jobs: []
    }
}

# Seconds in a Prometheus duration such as 30s, 1h30m or 15d.
export def prometheus-duration-seconds [duration: string]: nothing -> float {
    if not ($duration =~ '^(\d+(ms|s|m|h|d|w|y))+$') { error make {msg: $"'($duration)' is not a Prometheus duration such as 30s, 5m, 1h30m or 15d"} }
    $duration | parse --regex '(?<n>\d+)(?<unit>ms|s|m|h|d|w|y)' | each {|p| ($p.n | into int) * ($UNITS | get $p.unit) } | math sum | into float
}

# node_exporter job for a list of nodes ({name, address}).
export def prometheus-node-job [nodes: list<record>, --port: int = 9100]: nothing -> record {
    {name: "node", targets: ($nodes | each {|n| $"($n.address):($port)" }), labels: {}}
}

# Problems with settings; empty when valid.
export def prometheus-validate [settings: record]: nothing -> list<string> {
    let s = (prometheus-defaults | merge $settings)
    mut errors = []
    for key in [retention_time scrape_interval scrape_timeout evaluation_interval] {
        let value = ($s | get $key)
        if not ($value =~ '^(\d+(ms|s|m|h|d|w|y))+$') { $errors = ($errors | append $"($key) '($value)' is not a Prometheus duration") }
    }
    if ($errors | is-empty) and (prometheus-duration-seconds $s.scrape_timeout) > (prometheus-duration-seconds $s.scrape_interval) {
        $errors = ($errors | append $"scrape_timeout ($s.scrape_timeout) must not exceed scrape_interval ($s.scrape_interval)")
    }
    if ($s.retention_size | is-not-empty) and not ($s.retention_size =~ '^\d+(KB|MB|GB|TB)$') { $errors = ($errors | append $"retention_size '($s.retention_size)' must look like 50GB") }
    let dupes = ($s.jobs | get -o name | default [] | uniq --repeated)
    if ($dupes | is-not-empty) { $errors = ($errors | append $"jobs: duplicate names ($dupes | str join ', ')") }
    for job in $s.jobs {
        let bad = ($job.targets | where {|t| not ($t =~ '^[A-Za-z0-9.-]+:\d{1,5}$') })
        if ($bad | is-not-empty) { $errors = ($errors | append $"jobs.($job.name): targets ($bad | str join ', ') must be host:port") }
    }
    $errors
}

# prometheus.yml as a record (pipe it to `to yaml`).
export def prometheus-config [settings: record]: nothing -> record {
    let errors = (prometheus-validate $settings)
    if ($errors | is-not-empty) { error make {msg: ($errors | str join "; ")} }
    let s = (prometheus-defaults | merge $settings)
    let self_job = {job_name: "prometheus", static_configs: [{targets: [($s.listen | str replace "0.0.0.0" "localhost")]}]}
    let jobs = ($s.jobs | each {|j|
        let base = {job_name: $j.name, metrics_path: ($j.metrics_path? | default "/metrics"), scheme: ($j.scheme? | default "http")}
        let base = if ($j.interval? | is-not-empty) { $base | insert scrape_interval $j.interval } else { $base }
        $base | insert static_configs [{targets: $j.targets, labels: ($j.labels? | default {})}]
    })
    let config = {
        global: {scrape_interval: $s.scrape_interval, scrape_timeout: $s.scrape_timeout, evaluation_interval: $s.evaluation_interval, external_labels: $s.external_labels}
        rule_files: $s.rule_files
        scrape_configs: ([$self_job] | append $jobs)
    }
    if ($s.alertmanagers | is-empty) { $config } else {
        $config | insert alerting {alertmanagers: [{static_configs: [{targets: $s.alertmanagers}]}]}
    }
}

# Command-line flags of the prometheus service.
export def prometheus-flags [settings: record]: nothing -> list<string> {
    let s = (prometheus-defaults | merge $settings)
    [
        "--config.file=/etc/prometheus/prometheus.yml"
        $"--storage.tsdb.path=($s.storage_path)"
        $"--storage.tsdb.retention.time=($s.retention_time)"
    ] | append (if ($s.retention_size | is-empty) { [] } else { [$"--storage.tsdb.retention.size=($s.retention_size)"] }) | append [
        $"--web.listen-address=($s.listen)"
        "--web.enable-lifecycle"
    ]
}

# Ordered steps that install and start Prometheus.
export def prometheus-install-plan [settings: record]: nothing -> list<record> {
    let s = (prometheus-defaults | merge $settings)
    let config = (prometheus-config $settings | to yaml)
    let dir = $"prometheus-($s.version).linux-($s.arch)"
    [
        {name: "user", kind: "run", run: "id prometheus >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin prometheus"}
        {name: "download", kind: "run", run: $"curl -fsSL https://github.com/prometheus/prometheus/releases/download/v($s.version)/($dir).tar.gz | tar -xz -C /tmp"}
        {name: "binaries", kind: "run", run: $"install -m 0755 /tmp/($dir)/prometheus /tmp/($dir)/promtool /usr/local/bin/"}
        {name: "directories", kind: "run", run: $"install -d -o prometheus -g prometheus ($s.storage_path) && install -d /etc/prometheus/rules"}
        {name: "config", kind: "file", dest: "/etc/prometheus/prometheus.yml", content: $config}
        {name: "check config", kind: "run", run: "promtool check config /etc/prometheus/prometheus.yml"}
        {name: "unit", kind: "template", template: "prometheus.service.j2", dest: "/etc/systemd/system/prometheus.service"}
        {name: "start", kind: "run", run: "systemctl daemon-reload && systemctl enable --now prometheus"}
        {name: "ready", kind: "run", run: $"curl -fsS http://($s.listen | str replace '0.0.0.0' 'localhost')/-/ready"}
    ]
}
