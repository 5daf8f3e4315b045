use std/assert
use ../nulib/kubernetes-ha.nu *

let cps = [{name: "cp-0", address: "10.10.1.10"}, {name: "cp-1", address: "10.10.1.11"}, {name: "cp-2", address: "10.10.1.12"}]
let workers = [{name: "worker-0", address: "10.10.2.10"}, {name: "worker-1", address: "10.10.2.11"}]
let etcd = [{name: "etcd-0", address: "10.10.0.10"}, {name: "etcd-1", address: "10.10.0.11"}, {name: "etcd-2", address: "10.10.0.12"}]
let s = {api_vip: "10.10.1.100", control_planes: $cps, workers: $workers}

assert equal (kubernetes-ha-validate $s) []
let errors = (kubernetes-ha-validate {api_vip: "10.20.0.5", control_planes: ($cps | first 2), etcd_nodes: ($etcd | first 2), lb_port: 6443})
assert equal $errors [
    "control_planes: 2 nodes; HA needs an odd number, at least 3"
    "etcd_nodes: 2 nodes; use 3, 5 or 7, or none to run etcd on the control planes"
    "api_vip 10.20.0.5 is not in the /24 of cp-0, cp-1; keepalived needs one L2 segment"
    "lb_port must differ from 6443, where the local kube-apiserver listens"
]
assert equal (kubernetes-ha-validate ($s | merge {api_vip: "10.10.1.11"})) ["api_vip 10.10.1.11 is already a node address"]
assert equal (kubernetes-ha-validate ($s | merge {api_vip: "", workers: [{name: "cp-0", address: "10.10.2.50"}]})) ["duplicate node names: cp-0", "api_vip is required: a free address in the control planes' subnet"]

assert equal (kubernetes-ha-endpoint $s) "10.10.1.100:8443"

# co-located etcd when no etcd_nodes are given; dedicated etcd otherwise
assert equal (kubernetes-ha-topology $s | first | get roles) ["control-plane", "load-balancer", "etcd"]
let dedicated = (kubernetes-ha-topology ($s | merge {etcd_nodes: $etcd}))
assert equal ($dedicated | where {|n| "etcd" in $n.roles } | get name) ["etcd-0", "etcd-1", "etcd-2"]
assert equal ($dedicated | where {|n| "worker" in $n.roles } | get name) ["worker-0", "worker-1"]

assert equal (kubernetes-ha-join-order $s) [
    {name: "cp-0", action: "init", wave: 0}
    {name: "cp-1", action: "join-control-plane", wave: 1}
    {name: "cp-2", action: "join-control-plane", wave: 2}
    {name: "worker-0", action: "join", wave: 3}
    {name: "worker-1", action: "join", wave: 3}
]

let ts = (kubernetes-ha-taskservs ($s | merge {etcd_nodes: $etcd}))
assert equal ($ts | get taskserv) ["etcd", "kubernetes", "cilium"]
assert equal $ts.0.nodes ["etcd-0", "etcd-1", "etcd-2"]
assert equal $ts.1.nodes ["cp-0", "cp-1", "cp-2", "worker-0", "worker-1"]
assert equal $ts.1.settings.etcd {mode: "external", endpoints: ["https://10.10.0.10:2379", "https://10.10.0.11:2379", "https://10.10.0.12:2379"]}
assert equal $ts.1.settings.control_plane_endpoint "10.10.1.100:8443"
assert equal $ts.1.settings.kube_proxy false
assert equal ($ts.1.settings.nodes | where role == "control-plane" | length) 3
assert equal [$ts.2.settings.kube_proxy_replacement $ts.2.settings.k8s_service_host $ts.2.settings.k8s_service_port] [true "10.10.1.100" 8443]
# registries and repositories: example.com placeholders unless set, handed to the task services
assert equal [$ts.1.settings.image_repository $ts.1.settings.apt_repository] ["registry.example.com" "https://packages.example.com/kubernetes"]
assert equal [$ts.2.settings.chart_repository $ts.2.settings.helm_mirror] ["https://charts.example.com/cilium" "https://mirror.example.com/helm"]
let mirrored = (kubernetes-ha-taskservs ($s | merge {image_registry: "mirror.example.com/k8s", apt_repository: "https://mirror.example.com/kubernetes", chart_repository: "https://mirror.example.com/charts/cilium", helm_mirror: "https://mirror.example.com/helm"}))
assert equal $mirrored.1.settings.image_repository "mirror.example.com/k8s"
assert equal $mirrored.1.settings.apt_repository "https://mirror.example.com/kubernetes"
assert equal $mirrored.2.settings.chart_repository "https://mirror.example.com/charts/cilium"
assert equal (kubernetes-ha-validate ($s | merge {image_registry: "https://registry.example.com", chart_repository: "http://charts.example.com/cilium"})) [
    "image_registry 'https://registry.example.com' must be a registry host such as registry.example.com, without a scheme"
    "chart_repository 'http://charts.example.com/cilium' must be an https URL"
]
assert error { kubernetes-ha-taskservs ($s | merge {control_planes: ($cps | first 1)}) }

assert equal (kubernetes-ha-keepalived-peers $s | select state priority) [[state priority]; [MASTER 150] [BACKUP 140] [BACKUP 130]]

let plan = (kubernetes-ha-plan $s)
assert equal ($plan | length) 15
assert equal ($plan | first 4 | get name) ["haproxy cp-0", "keepalived cp-0", "vrrp secret cp-0", "start lb cp-0"]
# the VRRP password is substituted on the host, never rendered into the plan
assert str contains $plan.2.run "envsubst '${KEEPALIVED_AUTH_PASS}'"
assert equal ($plan | last 3 | get name) ["install etcd", "install kubernetes", "install cilium"]
