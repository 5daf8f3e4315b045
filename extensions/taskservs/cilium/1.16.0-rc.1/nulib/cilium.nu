# Cilium 1.16 (release candidate) task service: Helm values and the install plan.
# Routing is `routingMode` plus `tunnelProtocol`; L7 proxying runs in the standalone Envoy DaemonSet.

const HELM_VERSION = "3.15.2"

export def cilium-defaults []: nothing -> record {
    {
        version: "1.16.0-rc.1"
        cluster_name: "default"
        cluster_id: 0
        routing: "vxlan"
        native_cidr: ""
        ipam: "kubernetes"
        cluster_pool_cidr: "10.0.0.0/8"
        cluster_pool_mask: 24
        kube_proxy_replacement: false
        k8s_service_host: ""
        k8s_service_port: 6443
        encryption: "none"
        hubble: true
        hubble_ui: false
        chart_repository: "https://charts.example.com/cilium"
        helm_mirror: "https://mirror.example.com/helm"
        envoy_daemonset: true
    }
}

# Problems with settings; empty when valid.
export def cilium-validate [settings: record]: nothing -> list<string> {
    let s = (cilium-defaults | merge $settings)
    mut errors = []
    if $s.routing not-in [vxlan geneve native] { $errors = ($errors | append $"routing ($s.routing) must be vxlan, geneve or native") }
    if $s.routing == "native" and ($s.native_cidr | is-empty) { $errors = ($errors | append "native routing needs native_cidr, the CIDR routed without encapsulation") }
    if $s.ipam not-in [kubernetes cluster-pool] { $errors = ($errors | append $"ipam ($s.ipam) must be kubernetes or cluster-pool") }
    if $s.cluster_pool_mask < 16 or $s.cluster_pool_mask > 28 { $errors = ($errors | append $"cluster_pool_mask ($s.cluster_pool_mask) must be 16-28") }
    if $s.kube_proxy_replacement and ($s.k8s_service_host | is-empty) {
        $errors = ($errors | append "kube_proxy_replacement needs k8s_service_host: without kube-proxy Cilium cannot reach the API through the service IP")
    }
    if $s.encryption not-in [none wireguard ipsec] { $errors = ($errors | append $"encryption ($s.encryption) must be none, wireguard or ipsec") }
    if $s.cluster_id < 0 or $s.cluster_id > 255 { $errors = ($errors | append $"cluster_id ($s.cluster_id) must be 0-255") }
    if $s.hubble_ui and not $s.hubble { $errors = ($errors | append "hubble_ui needs hubble") }
    for key in [chart_repository helm_mirror] {
        let url = ($s | get $key)
        if not ($url | str starts-with "https://") { $errors = ($errors | append $"($key) '($url)' must be an https URL") }
    }
    $errors
}

# The Helm values for the cilium/cilium chart.
export def cilium-helm-values [settings: record]: nothing -> record {
    let errors = (cilium-validate $settings)
    if ($errors | is-not-empty) { error make {msg: ($errors | str join "; ")} }
    let s = (cilium-defaults | merge $settings)
    let routing = if $s.routing == "native" {
        {routingMode: "native", ipv4NativeRoutingCIDR: $s.native_cidr, autoDirectNodeRoutes: true}
    } else {
        {routingMode: "tunnel", tunnelProtocol: $s.routing}
    }
    let ipam = if $s.ipam == "cluster-pool" {
        {mode: "cluster-pool", operator: {clusterPoolIPv4PodCIDRList: [$s.cluster_pool_cidr], clusterPoolIPv4MaskSize: $s.cluster_pool_mask}}
    } else { {mode: "kubernetes"} }
    let values = {
        cluster: {name: $s.cluster_name, id: $s.cluster_id}
        ipam: $ipam
        kubeProxyReplacement: $s.kube_proxy_replacement
        operator: {replicas: 2}
        hubble: {enabled: $s.hubble, relay: {enabled: $s.hubble}, ui: {enabled: $s.hubble_ui}}
        encryption: {enabled: ($s.encryption != "none"), type: (if $s.encryption == "none" { "wireguard" } else { $s.encryption })}
        envoy: {enabled: $s.envoy_daemonset}
    } | merge $routing
    if $s.kube_proxy_replacement {
        $values | merge {k8sServiceHost: $s.k8s_service_host, k8sServicePort: $s.k8s_service_port}
    } else { $values }
}

# Ordered steps: helm (from helm_mirror when missing), the chart repository, the chart, and a status check.
export def cilium-install-plan [settings: record]: nothing -> list<record> {
    let s = (cilium-defaults | merge $settings)
    let values = (cilium-helm-values $settings)
    let helm_tarball = $"($s.helm_mirror | str trim --right --char '/')/helm-v($HELM_VERSION)-linux-amd64.tar.gz"
    [
        {name: "helm", kind: "run", run: $"command -v helm >/dev/null || curl -fsSL ($helm_tarball) | tar -xz -C /usr/local/bin --strip-components=1 linux-amd64/helm"}
        {name: "repository", kind: "run", run: $"helm repo add cilium ($s.chart_repository) --force-update"}
        {name: "values", kind: "file", dest: "/etc/provisioning/cilium-values.yaml", content: ($values | to yaml)}
        {name: "install", kind: "run", run: $"helm upgrade --install cilium cilium/cilium --version ($s.version) --devel --namespace kube-system --values /etc/provisioning/cilium-values.yaml --wait"}
        {name: "rollout", kind: "run", run: "kubectl -n kube-system rollout status daemonset/cilium --timeout=5m"}
    ]
}
