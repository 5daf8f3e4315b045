use std/assert
use ../nulib/kubernetes-single.nu *

let settings = {cluster_name: "edge-lab", node: {name: "edge-0", address: "192.168.56.10", cpus: 4}}

assert equal (kubernetes-single-validate $settings) []
let errors = (kubernetes-single-validate {cluster_name: "Edge Lab", node: {cpus: 1, memory_mb: 1024}, pod_cidr: "10.42.0.0/16"})
assert equal $errors [
    "cluster_name 'Edge Lab' must be a lower-case DNS label"
    "node.address is required"
    "node.cpus 1 is below the 2 CPUs kubeadm requires"
    "node.memory_mb 1024 is below the 2048 MB kubeadm requires"
    "pod_cidr 10.42.0.0/16: the flannel manifest expects 10.244.0.0/16"
]
assert equal (kubernetes-single-validate ($settings | merge {cni: "none", pod_cidr: "10.42.0.0/16"})) []
assert str contains (kubernetes-single-validate ($settings | merge {cni: "cilium"}) | first) "add the cilium taskserv"

# the node is merged over the default node, so unspecified fields keep their defaults
let ts = (kubernetes-single-taskservs $settings)
assert equal ($ts | get taskserv) ["containerd", "kubernetes"]
let k8s = $ts.1.settings
assert equal $k8s.nodes [{name: "edge-0", address: "192.168.56.10", role: "control-plane"}]
assert equal $k8s.etcd.mode "stacked"
assert equal $k8s.cluster_name "edge-lab"
assert equal $ts.0.settings.systemd_cgroup true
# one registry for the sandbox image and the control plane images, placeholders by default
assert equal $ts.0.settings.sandbox_image "registry.example.com/pause:3.9"
assert equal [$k8s.image_repository $k8s.apt_repository] ["registry.example.com" "https://packages.example.com/kubernetes"]
let mirrored = (kubernetes-single-taskservs ($settings | merge {image_registry: "mirror.example.com/k8s", apt_repository: "https://mirror.example.com/kubernetes"}))
assert equal $mirrored.0.settings.sandbox_image "mirror.example.com/k8s/pause:3.9"
assert equal [$mirrored.1.settings.image_repository $mirrored.1.settings.apt_repository] ["mirror.example.com/k8s" "https://mirror.example.com/kubernetes"]
assert equal (kubernetes-single-validate ($settings | merge {image_registry: "https://registry.example.com", apt_repository: "http://packages.example.com/kubernetes"})) [
    "image_registry 'https://registry.example.com' must be a registry host such as registry.example.com, without a scheme"
    "apt_repository 'http://packages.example.com/kubernetes' must be an https URL, e.g. https://packages.example.com/kubernetes"
]
assert error { kubernetes-single-taskservs {node: {address: ""}} }

let plan = (kubernetes-single-plan $settings)
assert equal ($plan | get name) ["install containerd", "install kubernetes", "kubeconfig", "cni flannel", "untaint", "ready"]
assert str contains $plan.3.run "flannel-io/flannel/releases/download/v0.24.2/kube-flannel.yml"
assert equal $plan.4.run "kubectl taint nodes edge-0 node-role.kubernetes.io/control-plane:NoSchedule-"
let bare = (kubernetes-single-plan ($settings | merge {cni: "none", schedule_on_control_plane: false}))
assert equal ($bare | get name) ["install containerd", "install kubernetes", "kubeconfig", "ready"]
