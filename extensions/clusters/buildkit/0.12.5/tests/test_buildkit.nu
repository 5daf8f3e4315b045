use std/assert
use ../nulib/buildkit.nu *

let workers = [
    {name: "build-amd64-0", address: "10.10.6.10"}
    {name: "build-arm64-0", address: "10.10.6.20", platforms: ["linux/arm64", "linux/arm/v7"]}
]
let s = {workers: $workers, mirrors: {"registry.example.com": "mirror.example.com"}}

assert equal (buildkit-validate $s) []
assert equal (buildkit-validate {}) ["workers: at least one build machine is needed"]
let errors = (buildkit-validate {workers: [{name: "a", address: "1.1.1.1", platforms: ["windows/amd64"]}, {name: "a", address: "1.1.1.2"}], tls: false, gc_keep_gb: 1})
assert equal $errors [
    "workers[0].platforms windows/amd64 unsupported"
    "workers: duplicate names a"
    "gc_keep_gb 1 is too small for build caches; use at least 5"
    "tls must stay on: buildkitd on TCP without TLS runs anything for anyone"
]

let cfg = (buildkit-config $s $workers.1 | to toml | from toml)
assert equal $cfg.grpc.address ["unix:///run/buildkit/buildkitd.sock", "tcp://10.10.6.20:1234"]
assert equal $cfg.worker.oci.enabled false
assert equal $cfg.worker.containerd.platforms ["linux/arm64", "linux/arm/v7"]
assert equal $cfg.worker.containerd.gckeepstorage 20000
assert equal ($cfg.registry | get "registry.example.com" | get mirrors) ["mirror.example.com"]
assert equal (buildkit-config {} $workers.0 | get registry) {}
assert equal (buildkit-config {} $workers.0 | get worker.containerd.platforms) ["linux/amd64"]

let cmds = (buildkit-buildx-commands $s --certs "/home/ci/.buildkit")
assert equal ($cmds | length) 3
assert str contains $cmds.0 "docker buildx create --name farm --node build-amd64-0 --driver remote"
assert equal ($cmds.0 | str contains "--append") false
assert str contains $cmds.1 "--append --node build-arm64-0"
assert str contains $cmds.1 "servername=build-arm64-0 --platform linux/arm64,linux/arm/v7 tcp://10.10.6.20:1234"
assert equal $cmds.2 "docker buildx inspect --bootstrap farm"

let plan = (buildkit-plan $s)
assert equal ($plan | first | get taskserv) "containerd"
assert equal ($plan | first | get nodes) ["build-amd64-0", "build-arm64-0"]
assert str contains ($plan | where name == "download build-amd64-0" | first | get run) "v0.12.5/buildkit-v0.12.5.linux-amd64.tar.gz"
assert str contains ($plan | where name == "download build-arm64-0" | first | get run) "buildkit-v0.12.5.linux-arm64.tar.gz"
assert equal ($plan | where name == "config build-arm64-0" | first | get content | from toml | get grpc.address.1) "tcp://10.10.6.20:1234"
assert equal ($plan | length) 11
assert error { buildkit-plan {workers: []} }
