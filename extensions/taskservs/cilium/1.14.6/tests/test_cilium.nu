use std/assert
use ../nulib/cilium.nu *

assert equal (cilium-validate {}) []
let errors = (cilium-validate {routing: "native", kube_proxy_replacement: true, encryption: "tls", cluster_id: 300, hubble: false, hubble_ui: true})
assert equal ($errors | length) 5
assert equal $errors.0 "native routing needs native_cidr, the CIDR routed without encapsulation"
assert str contains $errors.1 "kube_proxy_replacement needs k8s_service_host"
assert str contains $errors.2 "encryption tls"
assert str contains $errors.3 "cluster_id 300"
assert equal $errors.4 "hubble_ui needs hubble"

# tunnel mode: the 1.14 `tunnel` value, no routingMode
let tunnel = (cilium-helm-values {routing: "geneve"})
assert equal $tunnel.tunnel "geneve"
assert equal ("routingMode" in $tunnel) false
assert equal $tunnel.kubeProxyReplacement "disabled"
assert equal ("k8sServiceHost" in $tunnel) false
assert equal $tunnel.encryption.enabled false
assert equal $tunnel.ipam {mode: "kubernetes"}

# native routing with kube-proxy replacement and WireGuard
let native = (cilium-helm-values {routing: "native", native_cidr: "10.244.0.0/16", kube_proxy_replacement: true, k8s_service_host: "10.10.1.100", encryption: "wireguard", ipam: "cluster-pool", cluster_pool_cidr: "10.42.0.0/16"})
assert equal $native.tunnel "disabled"
assert equal $native.ipv4NativeRoutingCIDR "10.244.0.0/16"
assert equal $native.kubeProxyReplacement "strict"
assert equal [$native.k8sServiceHost $native.k8sServicePort] ["10.10.1.100" 6443]
assert equal $native.encryption {enabled: true, type: "wireguard"}
assert equal $native.ipam.operator.clusterPoolIPv4PodCIDRList ["10.42.0.0/16"]
assert error { cilium-helm-values {routing: "native"} }

let plan = (cilium-install-plan {hubble_ui: true})
assert equal ($plan | get name) ["helm", "repository", "values", "install", "rollout"]
assert str contains $plan.0.run "curl -fsSL https://mirror.example.com/helm/helm-v3.13.3-linux-amd64.tar.gz | tar -xz"
assert equal $plan.1.run "helm repo add cilium https://charts.example.com/cilium --force-update"
let mirrored = (cilium-install-plan {chart_repository: "https://mirror.example.com/charts/cilium", helm_mirror: "https://mirror.example.com/helm/"})
assert equal $mirrored.1.run "helm repo add cilium https://mirror.example.com/charts/cilium --force-update"
assert str contains $mirrored.0.run "https://mirror.example.com/helm/helm-v3.13.3-linux-amd64.tar.gz"
assert equal (cilium-validate {chart_repository: "http://charts.example.com/cilium", helm_mirror: "mirror.example.com"}) ["chart_repository 'http://charts.example.com/cilium' must be an https URL", "helm_mirror 'mirror.example.com' must be an https URL"]
assert str contains $plan.3.run "cilium/cilium --version 1.14.6 --namespace kube-system"
assert equal ($plan.2.content | from yaml | get hubble.ui.enabled) true
