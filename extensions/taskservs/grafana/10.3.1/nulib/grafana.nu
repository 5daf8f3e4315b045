# Grafana 10 task service: data source provisioning, grafana.ini and the install plan.

const TYPES = [prometheus loki tempo alertmanager postgres elasticsearch]

export def grafana-defaults []: nothing -> record {
    {
        version: "10.3.1"
        http_port: 3000
        domain: "localhost"
        root_url: ""
        prometheus_url: "http://localhost:9090"
        scrape_interval: "30s"
        datasources: []
        anonymous: false
        allow_sign_up: false
        plugins: []
        apt_repository: "https://packages.example.com/grafana"
    }
}

# Problems with settings; empty when valid.
export def grafana-validate [settings: record]: nothing -> list<string> {
    let s = (grafana-defaults | merge $settings)
    mut errors = []
    if $s.http_port < 1 or $s.http_port > 65535 { $errors = ($errors | append $"http_port ($s.http_port) must be 1-65535") }
    if not ($s.prometheus_url =~ '^https?://') { $errors = ($errors | append $"prometheus_url '($s.prometheus_url)' must be an http or https URL") }
    for ds in $s.datasources {
        if ($ds.type? | default "") not-in $TYPES { $errors = ($errors | append $"datasources.($ds.name? | default '?'): type ($ds.type? | default '') must be one of ($TYPES | str join ', ')") }
        if not (($ds.url? | default "") =~ '^https?://') { $errors = ($errors | append $"datasources.($ds.name? | default '?'): url must be an http or https URL") }
    }
    let names = (["Prometheus"] | append ($s.datasources | get -o name | default []))
    let dupes = ($names | uniq --repeated)
    if ($dupes | is-not-empty) { $errors = ($errors | append $"datasources: duplicate names ($dupes | str join ', ')") }
    if not ($s.apt_repository | str starts-with "https://") { $errors = ($errors | append $"apt_repository '($s.apt_repository)' must be an https URL, e.g. https://packages.example.com/grafana") }
    $errors
}

# /etc/grafana/provisioning/datasources/provisioning.yaml as a record; Prometheus is the default.
export def grafana-datasources [settings: record]: nothing -> record {
    let errors = (grafana-validate $settings)
    if ($errors | is-not-empty) { error make {msg: ($errors | str join "; ")} }
    let s = (grafana-defaults | merge $settings)
    let prometheus = {
        name: "Prometheus", type: "prometheus", uid: "prometheus", access: "proxy", url: $s.prometheus_url
        isDefault: true, editable: false, jsonData: {timeInterval: $s.scrape_interval, httpMethod: "POST"}
    }
    let extra = ($s.datasources | each {|ds|
        {name: $ds.name, type: $ds.type, uid: ($ds.name | str downcase | str replace --all --regex '[^a-z0-9]+' '-'), access: "proxy", url: $ds.url, isDefault: false, editable: false}
    })
    {apiVersion: 1, datasources: ([$prometheus] | append $extra)}
}

# grafana.ini as lines. The admin password is read by Grafana from the environment at start.
export def grafana-ini-lines [settings: record]: nothing -> list<string> {
    let s = (grafana-defaults | merge $settings)
    let root = if ($s.root_url | is-empty) { $"http://($s.domain):($s.http_port)/" } else { $s.root_url }
    let yn = {|b| if $b { "true" } else { "false" } }
    [
        "[server]" $"http_port = ($s.http_port)" $"domain = ($s.domain)" $"root_url = ($root)" ""
        "[security]" "admin_user = admin" "admin_password = $__env{GRAFANA_ADMIN_PASSWORD}" "disable_gravatar = true" "cookie_secure = true" ""
        "[users]" $"allow_sign_up = (do $yn $s.allow_sign_up)" ""
        "[auth.anonymous]" $"enabled = (do $yn $s.anonymous)" ""
        "[analytics]" "reporting_enabled = false" "check_for_updates = false"
    ]
}

# Ordered steps that install Grafana and provision its data sources.
# The apt repository (or your mirror of it) serves the packages and its signing key, gpg.key.
export def grafana-install-plan [settings: record]: nothing -> list<record> {
    let s = (grafana-defaults | merge $settings)
    let repo = ($s.apt_repository | str trim --right --char "/")
    let datasources = (grafana-datasources $settings | to yaml)
    let plugins = ($s.plugins | each {|p| {name: $"plugin ($p)", kind: "run", run: $"grafana-cli plugins install ($p)"} })
    [
        {name: "repository", kind: "run", run: $"install -d /etc/apt/keyrings && curl -fsSL ($repo)/gpg.key | gpg --dearmor --yes -o /etc/apt/keyrings/grafana.gpg && echo 'deb [signed-by=/etc/apt/keyrings/grafana.gpg] ($repo) stable main' > /etc/apt/sources.list.d/grafana.list"}
        {name: "packages", kind: "run", run: $"apt-get update && apt-get install -y grafana=($s.version) && apt-mark hold grafana"}
        {name: "config", kind: "file", dest: "/etc/grafana/grafana.ini", content: ((grafana-ini-lines $s | str join "\n") + "\n")}
        {name: "password", kind: "run", run: "umask 077 && printf 'GRAFANA_ADMIN_PASSWORD=%s\\n' \"$GRAFANA_ADMIN_PASSWORD\" > /etc/grafana/admin.env"}
        {name: "unit override", kind: "file", dest: "/etc/systemd/system/grafana-server.service.d/admin.conf", content: "[Service]\nEnvironmentFile=/etc/grafana/admin.env\n"}
        {name: "datasources", kind: "file", dest: "/etc/grafana/provisioning/datasources/provisioning.yaml", content: $datasources}
    ] | append $plugins | append [
        {name: "start", kind: "run", run: "systemctl daemon-reload && systemctl enable grafana-server && systemctl restart grafana-server"}
        {name: "health", kind: "run", run: $"curl -fsS http://localhost:($s.http_port)/api/health"}
    ]
}
