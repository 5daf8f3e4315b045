# kubernetes-ha cluster: control planes behind a keepalived VIP and HAProxy, external etcd, Cilium.

export def kubernetes-ha-defaults []: nothing -> record {
    {
        cluster_name: "prod"
        api_vip: ""
        lb_port: 8443
        interface: "eth0"
        control_planes: []
        etcd_nodes: []
        workers: []
        pod_cidr: "10.244.0.0/16"
        service_cidr: "10.96.0.0/12"
        image_registry: "registry.example.com"
        apt_repository: "https://packages.example.com/kubernetes"
        chart_repository: "https://charts.example.com/cilium"
        helm_mirror: "https://mirror.example.com/helm"
    }
}

def prefix24 [address: string]: nothing -> string { $address | split row "." | first 3 | str join "." }

# Problems with settings; empty when valid.
export def kubernetes-ha-validate [settings: record]: nothing -> list<string> {
    let s = (kubernetes-ha-defaults | merge $settings)
    mut errors = []
    let cps = ($s.control_planes | length)
    if $cps < 3 or ($cps mod 2) == 0 { $errors = ($errors | append $"control_planes: ($cps) nodes; HA needs an odd number, at least 3") }
    let etcd = ($s.etcd_nodes | length)
    if $etcd > 0 and ($etcd < 3 or ($etcd mod 2) == 0) { $errors = ($errors | append $"etcd_nodes: ($etcd) nodes; use 3, 5 or 7, or none to run etcd on the control planes") }
    let all = ($s.control_planes | append $s.etcd_nodes | append $s.workers)
    let dupes = ($all | get -o name | default [] | uniq --repeated)
    if ($dupes | is-not-empty) { $errors = ($errors | append $"duplicate node names: ($dupes | str join ', ')") }
    if ($s.api_vip | is-empty) {
        $errors = ($errors | append "api_vip is required: a free address in the control planes' subnet")
    } else {
        if $s.api_vip in ($all | get -o address | default []) { $errors = ($errors | append $"api_vip ($s.api_vip) is already a node address") }
        let outside = ($s.control_planes | where {|n| (prefix24 $n.address) != (prefix24 $s.api_vip) } | get -o name | default [])
        if ($outside | is-not-empty) { $errors = ($errors | append $"api_vip ($s.api_vip) is not in the /24 of ($outside | str join ', '); keepalived needs one L2 segment") }
    }
    if $s.lb_port == 6443 { $errors = ($errors | append "lb_port must differ from 6443, where the local kube-apiserver listens") }
    if ($s.image_registry | is-empty) or ($s.image_registry | str contains "://") {
        $errors = ($errors | append $"image_registry '($s.image_registry)' must be a registry host such as registry.example.com, without a scheme")
    }
    for key in [apt_repository chart_repository helm_mirror] {
        let url = ($s | get $key)
        if not ($url | str starts-with "https://") { $errors = ($errors | append $"($key) '($url)' must be an https URL") }
    }
    $errors
}

# The API endpoint every node and kubeconfig uses.
export def kubernetes-ha-endpoint [settings: record]: nothing -> string {
    let s = (kubernetes-ha-defaults | merge $settings)
    $"($s.api_vip):($s.lb_port)"
}

# Every node with its roles; etcd runs on the control planes when there are no etcd_nodes.
export def kubernetes-ha-topology [settings: record]: nothing -> list<record> {
    let s = (kubernetes-ha-defaults | merge $settings)
    let colocated = ($s.etcd_nodes | is-empty)
    let cp_roles = if $colocated { ["control-plane" "load-balancer" "etcd"] } else { ["control-plane" "load-balancer"] }
    ($s.control_planes | each {|n| {name: $n.name, address: $n.address, roles: $cp_roles} }
    | append ($s.etcd_nodes | each {|n| {name: $n.name, address: $n.address, roles: ["etcd"]} })
    | append ($s.workers | each {|n| {name: $n.name, address: $n.address, roles: ["worker"]} }))
}

# kubeadm order: one init, control planes joined one at a time, then all workers at once.
export def kubernetes-ha-join-order [settings: record]: nothing -> list<record> {
    let s = (kubernetes-ha-defaults | merge $settings)
    let cps = ($s.control_planes | enumerate | each {|e|
        {name: $e.item.name, action: (if $e.index == 0 { "init" } else { "join-control-plane" }), wave: $e.index}
    })
    let wave = ($s.control_planes | length)
    $cps | append ($s.workers | each {|n| {name: $n.name, action: "join", wave: $wave} })
}

# The task services to install, in order, with the nodes and settings for each. kubernetes pulls from
# image_registry and installs from apt_repository; cilium uses chart_repository and helm_mirror.
export def kubernetes-ha-taskservs [settings: record]: nothing -> list<record> {
    let errors = (kubernetes-ha-validate $settings)
    if ($errors | is-not-empty) { error make {msg: ($errors | str join "; ")} }
    let s = (kubernetes-ha-defaults | merge $settings)
    let topology = (kubernetes-ha-topology $s)
    let etcd = ($topology | where {|n| "etcd" in $n.roles })
    let k8s_nodes = ($topology | where {|n| "etcd" not-in $n.roles or "control-plane" in $n.roles })
    let endpoints = ($etcd | each {|n| $"https://($n.address):2379" })
    [
        {taskserv: "etcd", nodes: ($etcd | get name), settings: {nodes: ($etcd | select name address), tls: true}}
        {taskserv: "kubernetes", nodes: ($k8s_nodes | get name), settings: {
            cluster_name: $s.cluster_name, control_plane_endpoint: (kubernetes-ha-endpoint $s)
            pod_cidr: $s.pod_cidr, service_cidr: $s.service_cidr, kube_proxy: false
            etcd: {mode: "external", endpoints: $endpoints}
            nodes: ($k8s_nodes | each {|n| {name: $n.name, address: $n.address, role: (if "control-plane" in $n.roles { "control-plane" } else { "worker" })} })
            image_repository: $s.image_registry, apt_repository: $s.apt_repository
        }}
        {taskserv: "cilium", nodes: [($s.control_planes | first | get name)], settings: {
            kube_proxy_replacement: true, k8s_service_host: $s.api_vip, k8s_service_port: $s.lb_port
            routing: "vxlan", hubble: true
            chart_repository: $s.chart_repository, helm_mirror: $s.helm_mirror
        }}
    ]
}

# keepalived priorities: the first control plane is MASTER with the highest priority.
export def kubernetes-ha-keepalived-peers [settings: record]: nothing -> list<record> {
    let s = (kubernetes-ha-defaults | merge $settings)
    $s.control_planes | enumerate | each {|e|
        {name: $e.item.name, address: $e.item.address, state: (if $e.index == 0 { "MASTER" } else { "BACKUP" }), priority: (150 - $e.index * 10)}
    }
}

# The whole cluster: load balancers on the control planes, then the task services in order.
export def kubernetes-ha-plan [settings: record]: nothing -> list<record> {
    let taskservs = (kubernetes-ha-taskservs $settings)
    let s = (kubernetes-ha-defaults | merge $settings)
    let lb = ($s.control_planes | each {|n| [
        {name: $"haproxy ($n.name)", kind: "template", node: $n.name, template: "haproxy.cfg.j2", dest: "/etc/haproxy/haproxy.cfg"}
        {name: $"keepalived ($n.name)", kind: "template", node: $n.name, template: "keepalived.conf.j2", dest: "/etc/keepalived/keepalived.conf.in"}
        {name: $"vrrp secret ($n.name)", kind: "run", node: $n.name, run: "umask 077 && envsubst '${KEEPALIVED_AUTH_PASS}' < /etc/keepalived/keepalived.conf.in > /etc/keepalived/keepalived.conf && rm /etc/keepalived/keepalived.conf.in"}
        {name: $"start lb ($n.name)", kind: "run", node: $n.name, run: "systemctl enable haproxy keepalived && systemctl restart haproxy keepalived"}
    ] } | flatten)
    $lb | append ($taskservs | each {|t| {name: $"install ($t.taskserv)", kind: "taskserv", taskserv: $t.taskserv, nodes: $t.nodes, settings: $t.settings} })
}
