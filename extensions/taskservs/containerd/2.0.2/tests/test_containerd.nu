use std/assert
use ../nulib/containerd.nu *

assert equal (containerd-validate {}) []
let errors = (containerd-validate {version: "1.7.13", arch: "s390x", mirrors: {"registry.example.com": "http://mirror.example.com"}})
assert equal ($errors | length) 3
assert str contains $errors.0 "version 1.7.13 is not a 2.0 release"
assert str contains $errors.1 "arch s390x"
assert equal $errors.2 "mirrors.registry.example.com must be an https URL"

assert equal (containerd-download-url "2.0.2" "arm64") "https://github.com/containerd/containerd/releases/download/v2.0.2/containerd-2.0.2-linux-arm64.tar.gz"

# config format version 3: the CRI plugin is split into images and runtime
let cfg = (containerd-config {systemd_cgroup: false} | to toml | from toml)
assert equal $cfg.version 3
assert equal ("io.containerd.grpc.v1.cri" in $cfg.plugins) false
let images = ($cfg.plugins | get "io.containerd.cri.v1.images")
let runtime = ($cfg.plugins | get "io.containerd.cri.v1.runtime")
assert equal $images.pinned_images.sandbox "registry.example.com/pause:3.10"
assert equal (containerd-config {sandbox_image: "mirror.example.com/k8s/pause:3.10"} | get plugins | get "io.containerd.cri.v1.images" | get pinned_images.sandbox) "mirror.example.com/k8s/pause:3.10"
assert equal $images.registry.config_path "/etc/containerd/certs.d"
assert equal $runtime.containerd.runtimes.runc.runtime_type "io.containerd.runc.v2"
assert equal $runtime.containerd.runtimes.runc.options.SystemdCgroup false
assert equal $cfg.grpc.address "/run/containerd/containerd.sock"

# the mirror first; no `server` line, so containerd falls back to the registry's own endpoint
let hosts = (containerd-hosts-toml "registry.example.com" "https://mirror.example.com" | from toml)
assert equal ($hosts | columns) ["host"]
assert equal ($hosts.host | columns) ["https://mirror.example.com"]
assert equal ($hosts.host | get "https://mirror.example.com" | get capabilities) ["pull", "resolve"]

let plan = (containerd-install-plan {version: "2.0.2", mirrors: {"registry.example.com": "https://mirror.example.com"}})
assert equal ($plan | get name) ["download", "verify", "unpack", "kernel modules", "config dir", "config", "unit", "mirror registry.example.com", "start", "check"]
assert str contains $plan.0.run "v2.0.2/containerd-2.0.2-linux-amd64.tar.gz"
assert equal ($plan | where kind == "template" | get dest) ["/etc/containerd/config.toml", "/etc/systemd/system/containerd.service"]
assert equal $plan.7.dest "/etc/containerd/certs.d/registry.example.com/hosts.toml"
assert equal ($plan.7.content | from toml | get host | columns) ["https://mirror.example.com"]
assert error { containerd-install-plan {snapshotter: "aufs"} }
