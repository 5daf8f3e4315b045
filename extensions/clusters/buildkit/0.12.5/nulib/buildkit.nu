# buildkit cluster: buildkitd on containerd hosts, one buildx builder spanning them.

export def buildkit-defaults []: nothing -> record {
    {
        version: "0.12.5"
        builder: "farm"
        workers: []
        port: 1234
        tls: true
        tls_dir: "/etc/buildkit/tls"
        namespace: "buildkit"
        max_parallelism: 4
        gc_keep_gb: 20
        mirrors: {}
    }
}

# Problems with settings; empty when valid.
export def buildkit-validate [settings: record]: nothing -> list<string> {
    let s = (buildkit-defaults | merge $settings)
    mut errors = []
    if ($s.workers | is-empty) { $errors = ($errors | append "workers: at least one build machine is needed") }
    for w in ($s.workers | enumerate) {
        let bad = ($w.item.platforms? | default ["linux/amd64"] | where {|p| $p not-in ["linux/amd64" "linux/arm64" "linux/arm/v7" "linux/riscv64"] })
        if ($bad | is-not-empty) { $errors = ($errors | append $"workers[($w.index)].platforms ($bad | str join ', ') unsupported") }
    }
    let dupes = ($s.workers | get -o name | default [] | uniq --repeated)
    if ($dupes | is-not-empty) { $errors = ($errors | append $"workers: duplicate names ($dupes | str join ', ')") }
    if $s.max_parallelism < 1 { $errors = ($errors | append "max_parallelism must be at least 1") }
    if $s.gc_keep_gb < 5 { $errors = ($errors | append $"gc_keep_gb ($s.gc_keep_gb) is too small for build caches; use at least 5") }
    if not $s.tls { $errors = ($errors | append "tls must stay on: buildkitd on TCP without TLS runs anything for anyone") }
    $errors
}

# buildkitd.toml for one worker, as a record (pipe it to `to toml`).
export def buildkit-config [settings: record, worker: record]: nothing -> record {
    let s = (buildkit-defaults | merge $settings)
    let registry = ($s.mirrors | transpose name mirror | reduce --fold {} {|m, acc| $acc | insert $m.name {mirrors: [$m.mirror]} })
    {
        root: "/var/lib/buildkit"
        grpc: {
            address: ["unix:///run/buildkit/buildkitd.sock" $"tcp://($worker.address):($s.port)"]
            tls: {cert: $"($s.tls_dir)/server.crt", key: $"($s.tls_dir)/server.key", ca: $"($s.tls_dir)/ca.crt"}
        }
        worker: {
            oci: {enabled: false}
            containerd: {
                enabled: true
                address: "/run/containerd/containerd.sock"
                namespace: $s.namespace
                platforms: ($worker.platforms? | default ["linux/amd64"])
                gc: true
                gckeepstorage: ($s.gc_keep_gb * 1000)
                max-parallelism: $s.max_parallelism
            }
        }
        registry: $registry
    }
}

# docker buildx commands that create one builder with every worker as a node.
export def buildkit-buildx-commands [settings: record, --certs: string = "$HOME/.buildkit"]: nothing -> list<string> {
    let s = (buildkit-defaults | merge $settings)
    let tls = $"cacert=($certs)/ca.crt,cert=($certs)/client.crt,key=($certs)/client.key,servername="
    $s.workers | enumerate | each {|w|
        let append = if $w.index == 0 { "" } else { " --append" }
        $"docker buildx create --name ($s.builder)($append) --node ($w.item.name) --driver remote --driver-opt ($tls)($w.item.name) --platform ($w.item.platforms? | default ['linux/amd64'] | str join ',') tcp://($w.item.address):($s.port)"
    } | append $"docker buildx inspect --bootstrap ($s.builder)"
}

# The whole cluster: containerd on the workers, then buildkitd, then the builder.
export def buildkit-plan [settings: record]: nothing -> list<record> {
    let errors = (buildkit-validate $settings)
    if ($errors | is-not-empty) { error make {msg: ($errors | str join "; ")} }
    let s = (buildkit-defaults | merge $settings)
    let per_worker = ($s.workers | each {|w|
        let arch = ($w.platforms? | default ["linux/amd64"] | first | split row "/" | get 1)
        let tarball = $"buildkit-v($s.version).linux-($arch).tar.gz"
        [
        {name: $"download ($w.name)", kind: "run", node: $w.name, run: $"curl -fsSL https://github.com/moby/buildkit/releases/download/v($s.version)/($tarball) | tar -xz -C /usr/local"}
        {name: $"config ($w.name)", kind: "file", node: $w.name, dest: "/etc/buildkit/buildkitd.toml", content: (buildkit-config $s $w | to toml)}
        {name: $"unit ($w.name)", kind: "template", node: $w.name, template: "buildkit.service.j2", dest: "/etc/systemd/system/buildkit.service"}
        {name: $"start ($w.name)", kind: "run", node: $w.name, run: "systemctl daemon-reload && systemctl enable --now buildkit"}
    ] } | flatten)
    [{name: "install containerd", kind: "taskserv", taskserv: "containerd", nodes: ($s.workers | get name), settings: {}}]
    | append $per_worker
    | append ($s.workers | each {|w| {name: $"check ($w.name)", kind: "run", node: $w.name, run: "buildctl --addr unix:///run/buildkit/buildkitd.sock debug workers"} })
}
