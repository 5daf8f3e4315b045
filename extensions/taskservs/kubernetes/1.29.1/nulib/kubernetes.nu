# Kubernetes 1.29 task service (kubeadm): validation, node roles, kubeadm configuration, install plan.

const MINOR = "1.29"
const IMAGES = {pause: "3.9", etcd: "3.5.10-0", coredns: "v1.11.1"}

export def kubernetes-defaults []: nothing -> record {
    {
        version: "1.29.1"
        cluster_name: "kubernetes"
        pod_cidr: "10.244.0.0/16"
        service_cidr: "10.96.0.0/12"
        dns_domain: "cluster.local"
        api_port: 6443
        control_plane_endpoint: ""
        image_repository: "registry.example.com"
        apt_repository: "https://packages.example.com/kubernetes"
        cri_socket: "unix:///run/containerd/containerd.sock"
        kube_proxy: true
        etcd: {mode: "stacked", endpoints: [], pki_dir: "/etc/kubernetes/pki/etcd"}
        nodes: []
    }
}

# Settings over the defaults; nested records merge, lists are replaced.
def with-defaults [settings: record]: nothing -> record {
    kubernetes-defaults | merge deep --strategy=overwrite $settings
}

def ip-to-int [ip: string]: nothing -> int {
    $ip | split row "." | each {|octet| $octet | into int } | reduce --fold 0 {|octet, acc| $acc * 256 + $octet }
}

# First and last address of an IPv4 CIDR, as integers.
export def kubernetes-cidr-range [cidr: string]: nothing -> record {
    if not ($cidr =~ '^(\d{1,3}\.){3}\d{1,3}/\d{1,2}$') { error make {msg: $"'($cidr)' is not an IPv4 CIDR such as 10.96.0.0/12"} }
    let parts = ($cidr | split row "/")
    let prefix = ($parts.1 | into int)
    if $prefix > 32 { error make {msg: $"'($cidr)': the prefix must be 0-32"} }
    let size = (2 ** (32 - $prefix))
    let start = ((ip-to-int $parts.0) // $size) * $size
    {start: $start, end: ($start + $size - 1), prefix: $prefix}
}

export def kubernetes-cidrs-overlap [a: string, b: string]: nothing -> bool {
    let x = (kubernetes-cidr-range $a)
    let y = (kubernetes-cidr-range $b)
    $x.start <= $y.end and $y.start <= $x.end
}

# Problems with settings; empty when valid.
export def kubernetes-validate [settings: record]: nothing -> list<string> {
    let s = (with-defaults $settings)
    mut errors = []
    if not ($s.version | str starts-with $"($MINOR).") { $errors = ($errors | append $"version ($s.version) is not a ($MINOR) release") }
    let cidrs = (try { {pod: (kubernetes-cidr-range $s.pod_cidr), svc: (kubernetes-cidr-range $s.service_cidr)} } catch {|e| $e.msg })
    if ($cidrs | describe) == "string" {
        $errors = ($errors | append $cidrs)
    } else {
        if (kubernetes-cidrs-overlap $s.pod_cidr $s.service_cidr) { $errors = ($errors | append $"pod_cidr ($s.pod_cidr) overlaps service_cidr ($s.service_cidr)") }
        if $cidrs.svc.prefix < 12 { $errors = ($errors | append $"service_cidr ($s.service_cidr) is larger than /12, which kubeadm refuses") }
        if $cidrs.pod.prefix > 24 { $errors = ($errors | append $"pod_cidr ($s.pod_cidr) is smaller than /24, too small for one node") }
    }
    let control = ($s.nodes | where {|n| ($n.role? | default "worker") == "control-plane" })
    if ($control | is-empty) { $errors = ($errors | append "nodes: at least one node needs role control-plane") }
    if ($control | length) > 1 and ($s.control_plane_endpoint | is-empty) {
        $errors = ($errors | append "control_plane_endpoint is required with more than one control-plane node, e.g. k8s-api.example.internal:6443")
    }
    if $s.etcd.mode not-in [stacked external] { $errors = ($errors | append $"etcd.mode ($s.etcd.mode) must be stacked or external") }
    if $s.etcd.mode == "external" and ($s.etcd.endpoints | is-empty) { $errors = ($errors | append "etcd.endpoints is required when etcd.mode is external") }
    if not ($s.apt_repository | str starts-with "https://") { $errors = ($errors | append $"apt_repository '($s.apt_repository)' must be an https URL, e.g. https://packages.example.com/kubernetes") }
    $errors
}

# Nodes with the kubeadm action for each: the first control plane inits, the others join.
export def kubernetes-node-roles [nodes: list<record>]: nothing -> list<record> {
    let control = ($nodes | where {|n| ($n.role? | default "worker") == "control-plane" })
    let workers = ($nodes | where {|n| ($n.role? | default "worker") != "control-plane" })
    let first = ($control | first 1 | each {|n| $n | merge {role: "control-plane", action: "init", order: 0} })
    let others = ($control | skip 1 | each {|n| $n | merge {role: "control-plane", action: "join-control-plane", order: 1} })
    $first | append $others | append ($workers | each {|n| $n | merge {role: "worker", action: "join", order: 2} })
}

# The apt repository of this minor release: <apt_repository>/v1.xx/deb/.
export def kubernetes-apt-repository [settings: record]: nothing -> string {
    let s = (with-defaults $settings)
    $"($s.apt_repository | str trim --right --char '/')/v($MINOR)/deb/"
}

# Images `kubeadm config images list` would pull. Outside kubeadm's built-in default repository
# CoreDNS is <image_repository>/coredns, without the extra coredns/ level.
export def kubernetes-images [settings: record]: nothing -> list<string> {
    let s = (with-defaults $settings)
    let r = $s.image_repository
    let core = ([kube-apiserver kube-controller-manager kube-scheduler kube-proxy] | each {|c| $"($r)/($c):v($s.version)" })
    let etcd = if $s.etcd.mode == "stacked" { [$"($r)/etcd:($IMAGES.etcd)"] } else { [] }
    $core | append [$"($r)/pause:($IMAGES.pause)"] | append $etcd | append [$"($r)/coredns:($IMAGES.coredns)"]
}

# kubeadm configuration documents for one node (pipe each to `to yaml`, join with ---).
export def kubernetes-kubeadm-config [settings: record, node_name: string]: nothing -> list<record> {
    let s = (with-defaults $settings)
    let node = ($s.nodes | where name == $node_name)
    if ($node | is-empty) { error make {msg: $"no node named ($node_name)"} }
    let n = ($node | first)
    let etcd = if $s.etcd.mode == "external" {
        {external: {endpoints: $s.etcd.endpoints, caFile: $"($s.etcd.pki_dir)/ca.crt", certFile: $"($s.etcd.pki_dir)/apiserver-etcd-client.crt", keyFile: $"($s.etcd.pki_dir)/apiserver-etcd-client.key"}}
    } else { {local: {dataDir: "/var/lib/etcd"}} }
    let init = {
        apiVersion: "kubeadm.k8s.io/v1beta3", kind: "InitConfiguration"
        localAPIEndpoint: {advertiseAddress: $n.address, bindPort: $s.api_port}
        nodeRegistration: {name: $n.name, criSocket: $s.cri_socket, kubeletExtraArgs: {node-ip: $n.address}}
    }
    let init = if $s.kube_proxy { $init } else { $init | insert skipPhases ["addon/kube-proxy"] }
    let endpoint = if ($s.control_plane_endpoint | is-empty) { $"($n.address):($s.api_port)" } else { $s.control_plane_endpoint }
    let cluster = {
        apiVersion: "kubeadm.k8s.io/v1beta3", kind: "ClusterConfiguration"
        kubernetesVersion: $"v($s.version)", clusterName: $s.cluster_name
        controlPlaneEndpoint: $endpoint, imageRepository: $s.image_repository
        networking: {podSubnet: $s.pod_cidr, serviceSubnet: $s.service_cidr, dnsDomain: $s.dns_domain}
        etcd: $etcd
        apiServer: {certSANs: ([$n.address ($endpoint | split row ":" | first)] | uniq)}
    }
    let kubelet = {apiVersion: "kubelet.config.k8s.io/v1beta1", kind: "KubeletConfiguration", cgroupDriver: "systemd", serverTLSBootstrap: true}
    [$init $cluster $kubelet]
}

# Ordered steps that install Kubernetes on one node and run its kubeadm action.
export def kubernetes-install-plan [settings: record, node_name: string]: nothing -> list<record> {
    let errors = (kubernetes-validate $settings)
    if ($errors | is-not-empty) { error make {msg: ($errors | str join "; ")} }
    let s = (with-defaults $settings)
    let node = (kubernetes-node-roles $s.nodes | where name == $node_name | first)
    let repo = (kubernetes-apt-repository $s)
    let pkg = $"($s.version)-1.1"
    let action = match $node.action {
        "init" => $"kubeadm init --config /etc/kubernetes/kubeadm-config.yaml --upload-certs"
        "join-control-plane" => "kubeadm join --config /etc/kubernetes/kubeadm-join.yaml --control-plane"
        _ => "kubeadm join --config /etc/kubernetes/kubeadm-join.yaml"
    }
    [
        {name: "swap off", kind: "run", run: "swapoff -a && sed -i '/ swap / s/^/#/' /etc/fstab"}
        {name: "sysctl", kind: "template", template: "99-kubernetes.conf.j2", dest: "/etc/sysctl.d/99-kubernetes.conf"}
        {name: "apply sysctl", kind: "run", run: "sysctl --system"}
        {name: "repository key", kind: "run", run: $"curl -fsSL ($repo)Release.key | gpg --dearmor --yes -o /etc/apt/keyrings/kubernetes-apt-keyring.gpg"}
        {name: "repository", kind: "file", dest: "/etc/apt/sources.list.d/kubernetes.list", content: $"deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] ($repo) /\n"}
        {name: "packages", kind: "run", run: $"apt-get update && apt-get install -y kubelet=($pkg) kubeadm=($pkg) kubectl=($pkg) && apt-mark hold kubelet kubeadm kubectl"}
        {name: "kubeadm config", kind: "template", template: "kubeadm-config.yaml.j2", dest: "/etc/kubernetes/kubeadm-config.yaml"}
        {name: "pull images", kind: "run", run: "kubeadm config images pull --config /etc/kubernetes/kubeadm-config.yaml"}
        {name: $node.action, kind: "run", run: $action}
    ]
}
