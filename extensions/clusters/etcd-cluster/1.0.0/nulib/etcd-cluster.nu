# etcd-cluster: members, quorum, a private CA and the ordered plan.

export def etcd-cluster-defaults []: nothing -> record {
    {
        name: "etcd"
        members: []
        pki_dir: "/etc/etcd/pki"
        cert_days: 825
        client_names: ["apiserver-etcd-client"]
        backup_schedule: "*-*-* 02:00:00"
        backup_keep: 7
    }
}

# Members that must agree for writes to succeed.
export def etcd-cluster-quorum [members: int]: nothing -> int { ($members // 2) + 1 }

# Members that may fail while the cluster keeps quorum.
export def etcd-cluster-fault-tolerance [members: int]: nothing -> int { ($members - 1) // 2 }

# Problems with settings; empty when valid.
export def etcd-cluster-validate [settings: record]: nothing -> list<string> {
    let s = (etcd-cluster-defaults | merge $settings)
    mut errors = []
    let n = ($s.members | length)
    if $n < 3 or $n > 7 or ($n mod 2) == 0 { $errors = ($errors | append $"members: ($n); an etcd cluster needs 3, 5 or 7 members") }
    for key in [name address] {
        let dupes = ($s.members | get -o $key | default [] | uniq --repeated)
        if ($dupes | is-not-empty) { $errors = ($errors | append $"members: duplicate ($key) ($dupes | str join ', ')") }
    }
    let zones = ($s.members | where {|m| ($m.zone? | default "") != "" })
    if ($zones | is-not-empty) and $n >= 3 {
        let worst = ($zones | group-by zone | transpose zone list | each {|z| {zone: $z.zone, count: ($z.list | length)} } | sort-by count | last)
        if $worst.count > (etcd-cluster-fault-tolerance $n) {
            $errors = ($errors | append $"zone ($worst.zone) holds ($worst.count) of ($n) members; losing it loses quorum")
        }
    }
    if $s.backup_keep < 1 { $errors = ($errors | append "backup_keep must be at least 1") }
    $errors
}

# Certificates the cluster needs: the CA, server and peer per member, and named clients.
export def etcd-cluster-certificates [settings: record]: nothing -> list<record> {
    let s = (etcd-cluster-defaults | merge $settings)
    let ca = [{file: "ca", cn: $"($s.name)-ca", usage: "ca", dns: [], ips: []}]
    let members = ($s.members | each {|m|
        let dns = ([$m.name "localhost"] | append ($m.dns? | default []))
        let ips = [$m.address "127.0.0.1"]
        [{file: $m.name, cn: $m.name, usage: "server", dns: $dns, ips: $ips} {file: $"($m.name)-peer", cn: $m.name, usage: "peer", dns: $dns, ips: $ips}]
    } | flatten)
    $ca | append $members | append ($s.client_names | each {|c| {file: $c, cn: $c, usage: "client", dns: [], ips: []} })
}

# openssl commands that issue one certificate (run where the CA key lives).
export def etcd-cluster-openssl-commands [cert: record, --pki-dir: string = "/etc/etcd/pki", --days: int = 825]: nothing -> list<string> {
    let p = $"($pki_dir)/($cert.file)"
    if $cert.usage == "ca" {
        return [$"test -f ($p).key || openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -keyout ($p).key -out ($p).crt -subj /CN=($cert.cn) -days ($days * 4)"]
    }
    [
        $"openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -keyout ($p).key -out ($p).csr -subj /CN=($cert.cn)"
        $"openssl x509 -req -in ($p).csr -CA ($pki_dir)/ca.crt -CAkey ($pki_dir)/ca.key -CAcreateserial -out ($p).crt -days ($days) -extfile ($p).cnf -extensions ($cert.usage)"
    ]
}

# The whole cluster: PKI on the first member, etcd everywhere, a health check, backups.
export def etcd-cluster-plan [settings: record]: nothing -> list<record> {
    let errors = (etcd-cluster-validate $settings)
    if ($errors | is-not-empty) { error make {msg: ($errors | str join "; ")} }
    let s = (etcd-cluster-defaults | merge $settings)
    let first = ($s.members | first | get name)
    let pki = (etcd-cluster-certificates $s | each {|c|
        let ext = if $c.usage == "ca" { [] } else { [{name: $"cnf ($c.file)", kind: "template", node: $first, template: "openssl-member.cnf.j2", dest: $"($s.pki_dir)/($c.file).cnf", cert: $c}] }
        $ext | append {name: $"cert ($c.file)", kind: "run", node: $first, run: (etcd-cluster-openssl-commands $c --pki-dir $s.pki_dir --days $s.cert_days | str join " && ")}
    } | flatten)
    let copy = ($s.members | skip 1 | each {|m|
        {name: $"copy pki ($m.name)", kind: "run", node: $first, run: $"rsync -a --chmod=F600 ($s.pki_dir)/ca.crt ($s.pki_dir)/($m.name).* ($s.pki_dir)/($m.name)-peer.* root@($m.address):($s.pki_dir)/"}
    })
    let endpoints = ($s.members | each {|m| $"https://($m.address):2379" } | str join ",")
    $pki | append $copy | append [
        {name: "install etcd", kind: "taskserv", taskserv: "etcd", nodes: ($s.members | get name), settings: {nodes: ($s.members | select name address), tls: true, cert_dir: $s.pki_dir, cluster_token: $"($s.name)-cluster"}}
        {name: "health", kind: "run", node: $first, run: $"etcdctl --endpoints=($endpoints) --cacert ($s.pki_dir)/ca.crt --cert ($s.pki_dir)/($first).crt --key ($s.pki_dir)/($first).key endpoint health --cluster"}
        {name: "backup script", kind: "template", node: $first, template: "etcd-backup.sh.j2", dest: "/usr/local/sbin/etcd-backup"}
        {name: "backup timer", kind: "run", node: $first, run: $"systemd-run --unit etcd-backup --on-calendar='($s.backup_schedule)' /usr/local/sbin/etcd-backup"}
    ]
}
