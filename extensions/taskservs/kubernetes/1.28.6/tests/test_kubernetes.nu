use std/assert
use ../nulib/kubernetes.nu *

let ha = {
    control_plane_endpoint: "k8s-api.example.internal:6443"
    etcd: {mode: "external", endpoints: ["https://10.10.0.10:2379"]}
    nodes: [
        {name: "worker-0", address: "10.10.2.10"}
        {name: "cp-0", address: "10.10.1.10", role: "control-plane"}
        {name: "cp-1", address: "10.10.1.11", role: "control-plane"}
    ]
}

# CIDR arithmetic
assert equal (kubernetes-cidr-range "10.96.0.0/12") {start: 174063616, end: 175112191, prefix: 12}
assert equal (kubernetes-cidr-range "10.96.7.9/16").start (kubernetes-cidr-range "10.96.0.0/16").start
assert equal (kubernetes-cidrs-overlap "10.244.0.0/16" "10.96.0.0/12") false
assert equal (kubernetes-cidrs-overlap "10.0.0.0/8" "10.96.0.0/12") true
assert error { kubernetes-cidr-range "10.96.0/12" }

# validation
assert equal (kubernetes-validate $ha) []
let errors = (kubernetes-validate {version: "1.29.1", pod_cidr: "10.96.0.0/16", service_cidr: "10.0.0.0/8", etcd: {mode: "external"}, nodes: [{name: "a", address: "10.0.0.1", role: "control-plane"}, {name: "b", address: "10.0.0.2", role: "control-plane"}]})
assert equal $errors [
    "version 1.29.1 is not a 1.28 release"
    "pod_cidr 10.96.0.0/16 overlaps service_cidr 10.0.0.0/8"
    "service_cidr 10.0.0.0/8 is larger than /12, which kubeadm refuses"
    "control_plane_endpoint is required with more than one control-plane node, e.g. k8s-api.example.internal:6443"
    "etcd.endpoints is required when etcd.mode is external"
]
assert equal (kubernetes-validate {nodes: [], pod_cidr: "bad"}) ["'bad' is not an IPv4 CIDR such as 10.96.0.0/12", "nodes: at least one node needs role control-plane"]

# roles: the first control plane inits, the others join as control planes, then workers
let roles = (kubernetes-node-roles $ha.nodes)
assert equal ($roles | select name action) [[name action]; [cp-0 init] [cp-1 join-control-plane] [worker-0 join]]

# images for 1.28 (external etcd: no etcd image)
let images = (kubernetes-images $ha)
assert equal ($images | first) "registry.example.com/kube-apiserver:v1.28.6"
assert equal ("registry.example.com/coredns:v1.10.1" in $images) true
assert equal ("registry.example.com/pause:3.9" in $images) true
assert equal ($images | any {|i| $i | str contains "/etcd:" }) false
assert equal ("registry.example.com/etcd:3.5.9-0" in (kubernetes-images {})) true
assert equal (kubernetes-images {image_repository: "mirror.example.com/k8s"} | first) "mirror.example.com/k8s/kube-apiserver:v1.28.6"

# kubeadm configuration
let docs = (kubernetes-kubeadm-config ($ha | merge {kube_proxy: false}) "cp-1")
assert equal ($docs | get kind) [InitConfiguration ClusterConfiguration KubeletConfiguration]
assert equal $docs.0.apiVersion "kubeadm.k8s.io/v1beta3"
assert equal $docs.0.skipPhases ["addon/kube-proxy"]
assert equal $docs.1.imageRepository "registry.example.com"
assert equal $docs.1.kubernetesVersion "v1.28.6"
assert equal $docs.1.controlPlaneEndpoint "k8s-api.example.internal:6443"
assert equal $docs.1.etcd.external.caFile "/etc/kubernetes/pki/etcd/ca.crt"
assert equal $docs.1.apiServer.certSANs ["10.10.1.11", "k8s-api.example.internal"]
assert equal $docs.2.cgroupDriver "systemd"
assert equal (kubernetes-kubeadm-config {nodes: [{name: "solo", address: "10.0.0.5", role: "control-plane"}]} "solo" | get 1.etcd) {local: {dataDir: "/var/lib/etcd"}}

# install plan
let plan = (kubernetes-install-plan $ha "cp-1")
assert equal ($plan | last | get name) "join-control-plane"
assert str contains ($plan | last | get run) "--control-plane"
assert str contains ($plan | where name == "packages" | first | get run) "kubelet=1.28.6-1.1"
assert equal ($plan | where name == "repository" | first | get content) "deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] https://packages.example.com/kubernetes/v1.28/deb/ /\n"
assert str contains ($plan | where name == "repository key" | first | get run) "curl -fsSL https://packages.example.com/kubernetes/v1.28/deb/Release.key | gpg"
assert equal (kubernetes-apt-repository {apt_repository: "https://mirror.example.com/k8s/"}) "https://mirror.example.com/k8s/v1.28/deb/"
assert equal (kubernetes-validate ($ha | merge {apt_repository: "http://mirror.example.com/k8s"})) ["apt_repository 'http://mirror.example.com/k8s' must be an https URL, e.g. https://packages.example.com/kubernetes"]
assert equal (kubernetes-install-plan $ha "cp-0" | last | get run) "kubeadm init --config /etc/kubernetes/kubeadm-config.yaml --upload-certs"
assert error { kubernetes-install-plan ($ha | merge {nodes: []}) "cp-0" }
