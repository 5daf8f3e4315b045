# etcd 3.5 task service: member configuration for a statically bootstrapped cluster.

export def etcd-defaults []: nothing -> record {
    {
        version: "3.5.9"
        arch: "amd64"
        cluster_token: "etcd-cluster"
        data_dir: "/var/lib/etcd"
        cert_dir: "/etc/etcd/pki"
        client_port: 2379
        peer_port: 2380
        tls: true
        heartbeat_interval: 100
        election_timeout: 1000
        snapshot_count: 10000
        quota_backend_gb: 2
        nodes: []
    }
}

def scheme [tls: bool]: nothing -> string { if $tls { "https" } else { "http" } }

def tls-flags [s: record, name: string]: nothing -> string {
    if $s.tls { $" --cacert ($s.cert_dir)/ca.crt --cert ($s.cert_dir)/($name).crt --key ($s.cert_dir)/($name).key" } else { "" }
}

# Problems with settings; empty when valid.
export def etcd-validate [settings: record]: nothing -> list<string> {
    let s = (etcd-defaults | merge $settings)
    mut errors = []
    let count = ($s.nodes | length)
    if $count == 0 or ($count mod 2) == 0 { $errors = ($errors | append $"nodes: ($count) members; use an odd number: 1, 3, 5 or 7, so quorum survives a failure") }
    if $count > 7 { $errors = ($errors | append $"nodes: ($count) members; more than 7 slows every write") }
    let dupes = ($s.nodes | get -o name | default [] | uniq --repeated)
    if ($dupes | is-not-empty) { $errors = ($errors | append $"nodes: duplicate names ($dupes | str join ', ')") }
    if $s.client_port == $s.peer_port { $errors = ($errors | append "client_port and peer_port must differ") }
    if $s.election_timeout < (5 * $s.heartbeat_interval) {
        $errors = ($errors | append $"election_timeout ($s.election_timeout) must be at least 5 x heartbeat_interval ($s.heartbeat_interval)")
    }
    if $s.quota_backend_gb < 1 or $s.quota_backend_gb > 8 { $errors = ($errors | append $"quota_backend_gb ($s.quota_backend_gb) must be 1-8") }
    $errors
}

# --initial-cluster: name=peer-url pairs joined with commas.
export def etcd-initial-cluster [settings: record]: nothing -> string {
    let s = (etcd-defaults | merge $settings)
    $s.nodes | each {|n| $"($n.name)=(scheme $s.tls)://($n.address):($s.peer_port)" } | str join ","
}

# Client endpoints of every member, e.g. for kube-apiserver --etcd-servers.
export def etcd-endpoints [settings: record]: nothing -> list<string> {
    let s = (etcd-defaults | merge $settings)
    $s.nodes | each {|n| $"(scheme $s.tls)://($n.address):($s.client_port)" }
}

# The etcd.conf.yml of one member, as a record (pipe it to `to yaml`).
export def etcd-member-config [settings: record, name: string]: nothing -> record {
    let s = (etcd-defaults | merge $settings)
    let node = ($s.nodes | where name == $name)
    if ($node | is-empty) { error make {msg: $"no member named ($name); members are ($s.nodes | get -o name | default [] | str join ', ')"} }
    let n = ($node | first)
    let proto = (scheme $s.tls)
    let base = {
        name: $n.name
        data-dir: $s.data_dir
        listen-client-urls: $"($proto)://($n.address):($s.client_port),($proto)://127.0.0.1:($s.client_port)"
        advertise-client-urls: $"($proto)://($n.address):($s.client_port)"
        listen-peer-urls: $"($proto)://($n.address):($s.peer_port)"
        initial-advertise-peer-urls: $"($proto)://($n.address):($s.peer_port)"
        initial-cluster: (etcd-initial-cluster $s)
        initial-cluster-token: $s.cluster_token
        initial-cluster-state: "new"
        heartbeat-interval: $s.heartbeat_interval
        election-timeout: $s.election_timeout
        snapshot-count: $s.snapshot_count
        quota-backend-bytes: ($s.quota_backend_gb * 1024 * 1024 * 1024)
        experimental-initial-corrupt-check: true
    }
    if not $s.tls { return $base }
    let security = {
        cert-file: $"($s.cert_dir)/($n.name).crt", key-file: $"($s.cert_dir)/($n.name).key"
        trusted-ca-file: $"($s.cert_dir)/ca.crt", client-cert-auth: true
    }
    $base | merge {
        client-transport-security: $security
        peer-transport-security: ($security | merge {cert-file: $"($s.cert_dir)/($n.name)-peer.crt", key-file: $"($s.cert_dir)/($n.name)-peer.key"})
    }
}

# Ordered steps that install one member.
export def etcd-install-plan [settings: record, name: string]: nothing -> list<record> {
    let errors = (etcd-validate $settings)
    if ($errors | is-not-empty) { error make {msg: ($errors | str join "; ")} }
    let s = (etcd-defaults | merge $settings)
    let file = $"etcd-v($s.version)-linux-($s.arch).tar.gz"
    let url = $"https://github.com/etcd-io/etcd/releases/download/v($s.version)/($file)"
    [
        {name: "user", kind: "run", run: "id etcd >/dev/null 2>&1 || useradd --system --home-dir /var/lib/etcd --shell /usr/sbin/nologin etcd"}
        {name: "download", kind: "run", run: $"curl -fsSLo /tmp/($file) ($url)"}
        {name: "unpack", kind: "run", run: $"tar -C /usr/local/bin --strip-components=1 -xzf /tmp/($file) etcd-v($s.version)-linux-($s.arch)/etcd etcd-v($s.version)-linux-($s.arch)/etcdctl etcd-v($s.version)-linux-($s.arch)/etcdutl"}
        {name: "directories", kind: "run", run: $"install -d -o etcd -g etcd -m 0700 ($s.data_dir) && install -d -m 0755 /etc/etcd ($s.cert_dir)"}
        {name: "config", kind: "file", dest: "/etc/etcd/etcd.conf.yml", content: (etcd-member-config $s $name | to yaml)}
        {name: "unit", kind: "template", template: "etcd.service.j2", dest: "/etc/systemd/system/etcd.service"}
        {name: "start", kind: "run", run: "systemctl daemon-reload && systemctl enable --now etcd"}
        {name: "health", kind: "run", run: $"etcdctl --endpoints=(etcd-endpoints $s | str join ',')(tls-flags $s $name) endpoint health"}
    ]
}
