# containerd 2.0 task service: settings, config.toml (format version 3) and the install plan.
# Plans are data: "run" steps are shell commands, "template" steps render a file from templates/.

const CRI_IMAGES = "io.containerd.cri.v1.images"
const CRI_RUNTIME = "io.containerd.cri.v1.runtime"

export def containerd-defaults []: nothing -> record {
    {
        version: "2.0.2"
        arch: "amd64"
        root: "/var/lib/containerd"
        state: "/run/containerd"
        sandbox_image: "registry.example.com/pause:3.10"
        snapshotter: "overlayfs"
        systemd_cgroup: true
        max_concurrent_downloads: 3
        mirrors: {}
    }
}

# Problems with settings (merged over the defaults); empty when valid.
export def containerd-validate [settings: record]: nothing -> list<string> {
    let s = (containerd-defaults | merge $settings)
    mut errors = []
    if not ($s.version | str starts-with "2.0.") { $errors = ($errors | append $"version ($s.version) is not a 2.0 release; this extension installs containerd 2.0") }
    if $s.arch not-in [amd64 arm64] { $errors = ($errors | append $"arch ($s.arch) must be amd64 or arm64") }
    if $s.snapshotter not-in [overlayfs native zfs btrfs] { $errors = ($errors | append $"snapshotter ($s.snapshotter) must be overlayfs, native, zfs or btrfs") }
    if $s.max_concurrent_downloads < 1 { $errors = ($errors | append "max_concurrent_downloads must be at least 1") }
    for reg in ($s.mirrors | transpose name url) {
        if not ($reg.url | str starts-with "https://") { $errors = ($errors | append $"mirrors.($reg.name) must be an https URL") }
    }
    $errors
}

export def containerd-download-url [version: string, arch: string]: nothing -> string {
    $"https://github.com/containerd/containerd/releases/download/v($version)/containerd-($version)-linux-($arch).tar.gz"
}

# /etc/containerd/config.toml as a record (pipe it to `to toml`).
export def containerd-config [settings: record]: nothing -> record {
    let s = (containerd-defaults | merge $settings)
    {
        version: 3
        root: $s.root
        state: $s.state
        grpc: {address: $"($s.state)/containerd.sock"}
        plugins: {
            $CRI_IMAGES: {
                snapshotter: $s.snapshotter
                max_concurrent_downloads: $s.max_concurrent_downloads
                pinned_images: {sandbox: $s.sandbox_image}
                registry: {config_path: "/etc/containerd/certs.d"}
            }
            $CRI_RUNTIME: {
                containerd: {
                    default_runtime_name: "runc"
                    runtimes: {runc: {runtime_type: "io.containerd.runc.v2", options: {SystemdCgroup: $s.systemd_cgroup}}}
                }
            }
        }
    }
}

# certs.d/<registry>/hosts.toml for a pull-through mirror. There is no `server` line: containerd tries
# the mirror first and then falls back to the registry's own endpoint, which it derives from the name.
export def containerd-hosts-toml [registry: string, mirror: string]: nothing -> string {
    [$"# pulls from ($registry) go through this mirror first" $"[host.\"($mirror)\"]" "  capabilities = [\"pull\", \"resolve\"]" ""] | str join "\n"
}

# Ordered steps that install and start containerd.
export def containerd-install-plan [settings: record]: nothing -> list<record> {
    let errors = (containerd-validate $settings)
    if ($errors | is-not-empty) { error make {msg: ($errors | str join "; ")} }
    let s = (containerd-defaults | merge $settings)
    let url = (containerd-download-url $s.version $s.arch)
    let tarball = $"/tmp/containerd-($s.version)-linux-($s.arch).tar.gz"
    let mirrors = ($s.mirrors | transpose name url | each {|m|
        {name: $"mirror ($m.name)", kind: "file", dest: $"/etc/containerd/certs.d/($m.name)/hosts.toml", content: (containerd-hosts-toml $m.name $m.url)}
    })
    [
        {name: "download", kind: "run", run: $"curl -fsSLo ($tarball) ($url)"}
        {name: "verify", kind: "run", run: $"curl -fsSL ($url).sha256sum | sed 's|  .*|  ($tarball)|' | sha256sum --check"}
        {name: "unpack", kind: "run", run: $"tar -C /usr/local -xzf ($tarball)"}
        {name: "kernel modules", kind: "run", run: "printf 'overlay\\nbr_netfilter\\n' > /etc/modules-load.d/containerd.conf && modprobe overlay && modprobe br_netfilter"}
        {name: "config dir", kind: "run", run: "mkdir -p /etc/containerd/certs.d"}
        {name: "config", kind: "template", template: "config.toml.j2", dest: "/etc/containerd/config.toml"}
        {name: "unit", kind: "template", template: "containerd.service.j2", dest: "/etc/systemd/system/containerd.service"}
    ] | append $mirrors | append [
        {name: "start", kind: "run", run: "systemctl daemon-reload && systemctl enable --now containerd"}
        {name: "check", kind: "run", run: $"ctr --address ($s.state)/containerd.sock version"}
    ]
}
