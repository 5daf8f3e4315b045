# kubernetes-single cluster: one machine runs containerd, a kubeadm control plane and the workloads.

const FLANNEL = "v0.24.2"
# The sandbox image kubeadm 1.28 and 1.29 expect; containerd is told to use the same one.
const PAUSE = "3.9"

export def kubernetes-single-defaults []: nothing -> record {
    {
        cluster_name: "dev"
        node: {name: "k8s-0", address: "", memory_mb: 4096, cpus: 2}
        pod_cidr: "10.244.0.0/16"
        service_cidr: "10.96.0.0/12"
        cni: "flannel"
        schedule_on_control_plane: true
        image_registry: "registry.example.com"
        apt_repository: "https://packages.example.com/kubernetes"
    }
}

# Problems with settings; empty when valid.
export def kubernetes-single-validate [settings: record]: nothing -> list<string> {
    let s = (kubernetes-single-defaults | merge deep $settings)
    mut errors = []
    if not ($s.cluster_name =~ '^[a-z][a-z0-9-]{0,62}$') { $errors = ($errors | append $"cluster_name '($s.cluster_name)' must be a lower-case DNS label") }
    if ($s.node.address | is-empty) { $errors = ($errors | append "node.address is required") }
    if $s.node.cpus < 2 { $errors = ($errors | append $"node.cpus ($s.node.cpus) is below the 2 CPUs kubeadm requires") }
    if $s.node.memory_mb < 2048 { $errors = ($errors | append $"node.memory_mb ($s.node.memory_mb) is below the 2048 MB kubeadm requires") }
    if $s.cni not-in [flannel none] { $errors = ($errors | append $"cni ($s.cni) must be flannel or none; for Cilium use none and add the cilium taskserv") }
    if $s.cni == "flannel" and $s.pod_cidr != "10.244.0.0/16" { $errors = ($errors | append $"pod_cidr ($s.pod_cidr): the flannel manifest expects 10.244.0.0/16") }
    if $s.pod_cidr == $s.service_cidr { $errors = ($errors | append "pod_cidr and service_cidr must differ") }
    if ($s.image_registry | is-empty) or ($s.image_registry | str contains "://") {
        $errors = ($errors | append $"image_registry '($s.image_registry)' must be a registry host such as registry.example.com, without a scheme")
    }
    if not ($s.apt_repository | str starts-with "https://") { $errors = ($errors | append $"apt_repository '($s.apt_repository)' must be an https URL, e.g. https://packages.example.com/kubernetes") }
    $errors
}

# The task services to install, in order, each with the settings it receives. Both pull from
# image_registry; kubernetes installs its packages from apt_repository.
export def kubernetes-single-taskservs [settings: record]: nothing -> list<record> {
    let errors = (kubernetes-single-validate $settings)
    if ($errors | is-not-empty) { error make {msg: ($errors | str join "; ")} }
    let s = (kubernetes-single-defaults | merge deep $settings)
    let node = {name: $s.node.name, address: $s.node.address, role: "control-plane"}
    let base = [
        {taskserv: "containerd", nodes: [$node.name], settings: {systemd_cgroup: true, sandbox_image: $"($s.image_registry)/pause:($PAUSE)"}}
        {taskserv: "kubernetes", nodes: [$node.name], settings: {
            cluster_name: $s.cluster_name, pod_cidr: $s.pod_cidr, service_cidr: $s.service_cidr
            etcd: {mode: "stacked"}, kube_proxy: true, nodes: [$node]
            image_repository: $s.image_registry, apt_repository: $s.apt_repository
        }}
    ]
    $base
}

# Ordered steps for the whole cluster: task services, then the single-node adjustments.
export def kubernetes-single-plan [settings: record]: nothing -> list<record> {
    let s = (kubernetes-single-defaults | merge deep $settings)
    let installs = (kubernetes-single-taskservs $settings | each {|t| {name: $"install ($t.taskserv)", kind: "taskserv", taskserv: $t.taskserv, settings: $t.settings} })
    let kubeconfig = {name: "kubeconfig", kind: "run", run: "install -d -m 0700 $HOME/.kube && install -m 0600 /etc/kubernetes/admin.conf $HOME/.kube/config"}
    let untaint = if $s.schedule_on_control_plane {
        [{name: "untaint", kind: "run", run: $"kubectl taint nodes ($s.node.name) node-role.kubernetes.io/control-plane:NoSchedule-"}]
    } else { [] }
    let cni = if $s.cni == "flannel" {
        [{name: "cni flannel", kind: "run", run: $"kubectl apply -f https://github.com/flannel-io/flannel/releases/download/($FLANNEL)/kube-flannel.yml"}]
    } else { [] }
    $installs | append $kubeconfig | append $cni | append $untaint | append [
        {name: "ready", kind: "run", run: $"kubectl wait --for=condition=Ready node/($s.node.name) --timeout=5m"}
    ]
}
