use std/assert
use ../nulib/containerd.nu *

assert equal (containerd-validate {}) []
let errors = (containerd-validate {version: "2.0.2", arch: "s390x", mirrors: {"registry.example.com": "http://mirror.example.com"}})
assert equal ($errors | length) 3
assert str contains $errors.0 "version 2.0.2 is not a 1.7 release"
assert str contains $errors.1 "arch s390x"
assert equal $errors.2 "mirrors.registry.example.com must be an https URL"

assert equal (containerd-download-url "1.7.13" "arm64") "https://github.com/containerd/containerd/releases/download/v1.7.13/containerd-1.7.13-linux-arm64.tar.gz"

# config format version 2 with the CRI plugin under io.containerd.grpc.v1.cri
let cfg = (containerd-config {systemd_cgroup: false} | to toml | from toml)
assert equal $cfg.version 2
let cri = ($cfg.plugins | get "io.containerd.grpc.v1.cri")
assert equal $cri.sandbox_image "registry.example.com/pause:3.9"
assert equal (containerd-config {sandbox_image: "mirror.example.com/k8s/pause:3.9"} | get plugins | get "io.containerd.grpc.v1.cri" | get sandbox_image) "mirror.example.com/k8s/pause:3.9"
assert equal $cri.containerd.runtimes.runc.runtime_type "io.containerd.runc.v2"
assert equal $cri.containerd.runtimes.runc.options.SystemdCgroup false
assert equal $cri.registry.config_path "/etc/containerd/certs.d"
assert equal $cfg.grpc.address "/run/containerd/containerd.sock"

# the mirror first; no `server` line, so containerd falls back to the registry's own endpoint
let hosts = (containerd-hosts-toml "registry.example.com" "https://mirror.example.com" | from toml)
assert equal ($hosts | columns) ["host"]
assert equal ($hosts.host | columns) ["https://mirror.example.com"]
assert equal ($hosts.host | get "https://mirror.example.com" | get capabilities) ["pull", "resolve"]

let plan = (containerd-install-plan {version: "1.7.13", mirrors: {"registry.example.com": "https://mirror.example.com"}})
assert equal ($plan | get name) ["download", "verify", "unpack", "kernel modules", "config dir", "config", "unit", "mirror registry.example.com", "start", "check"]
assert str contains $plan.0.run "v1.7.13/containerd-1.7.13-linux-amd64.tar.gz"
assert equal ($plan | where kind == "template" | get dest) ["/etc/containerd/config.toml", "/etc/systemd/system/containerd.service"]
assert equal $plan.7.dest "/etc/containerd/certs.d/registry.example.com/hosts.toml"
assert equal ($plan.7.content | from toml | get host | columns) ["https://mirror.example.com"]
assert error { containerd-install-plan {snapshotter: "aufs"} }
