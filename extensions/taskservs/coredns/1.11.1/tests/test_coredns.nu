use std/assert
use ../nulib/coredns.nu *

assert equal (coredns-cluster-ip "10.96.0.0/12") "10.96.0.10"
assert equal (coredns-cluster-ip "172.20.5.0/16") "172.20.0.10"
assert equal (coredns-cluster-ip "192.168.128.0/17") "192.168.128.10"
assert error { coredns-cluster-ip "10.96/12" }

assert equal (coredns-validate {}) []
let errors = (coredns-validate {dns_domain: "Cluster_Local", replicas: 0, upstreams: [], cache_ttl: 7200, stub_zones: {"corp.internal": []}})
assert equal $errors [
    "dns_domain 'Cluster_Local' is not a DNS domain"
    "replicas must be at least 1"
    "upstreams must name at least one resolver or /etc/resolv.conf"
    "cache_ttl 7200 must be 0-3600 seconds"
    "stub_zones.corp.internal needs at least one server"
]

let corefile = (coredns-corefile {
    dns_domain: "k8s.example"
    upstreams: ["1.1.1.1", "9.9.9.9"]
    stub_zones: {"corp.internal": ["10.0.0.2", "10.0.0.3"]}
    hosts: {"registry.example.com": "10.0.5.20"}
})
let lines = ($corefile | lines)
assert equal ($lines | first) ".:53 {"
assert equal ("    kubernetes k8s.example in-addr.arpa ip6.arpa {" in $lines) true
assert equal ("    forward . 1.1.1.1 9.9.9.9 {" in $lines) true
assert equal ("        10.0.5.20 registry.example.com" in $lines) true
assert equal ($lines | skip until {|l| $l == "corp.internal:53 {" } | first 4) ["corp.internal:53 {", "    errors", "    cache 30", "    forward . 10.0.0.2 10.0.0.3"]
# braces balance
assert equal ($corefile | split chars | where $it == "{" | length) ($corefile | split chars | where $it == "}" | length)
assert equal ((coredns-corefile {}) | str contains "hosts {") false

let plan = (coredns-install-plan {service_cidr: "10.112.0.0/12"})
assert equal ($plan | get name) ["corefile", "configmap", "image", "replicas", "rollout", "resolve"]
assert str contains $plan.2.run "coredns=registry.example.com/coredns:v1.11.1"
assert str contains $plan.5.run "--image=registry.example.com/busybox:1.36"
let mirrored = (coredns-install-plan {image_registry: "mirror.example.com/k8s"})
assert equal ($mirrored.2.run | str ends-with "coredns=mirror.example.com/k8s/coredns:v1.11.1") true
assert str contains $mirrored.5.run "--image=mirror.example.com/k8s/busybox:1.36"
assert equal (coredns-validate {image_registry: "https://registry.example.com"}) ["image_registry 'https://registry.example.com' must be a registry host such as registry.example.com, without a scheme"]
assert ($plan.5.run | str ends-with "kubernetes.default.svc.cluster.local 10.112.0.10")
