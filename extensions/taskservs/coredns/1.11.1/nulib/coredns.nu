# CoreDNS 1.11 task service: the cluster DNS address, the Corefile and the rollout plan.

export def coredns-defaults []: nothing -> record {
    {
        version: "1.11.1"
        dns_domain: "cluster.local"
        service_cidr: "10.96.0.0/12"
        replicas: 2
        upstreams: ["/etc/resolv.conf"]
        cache_ttl: 30
        stub_zones: {}
        hosts: {}
        image_registry: "registry.example.com"
    }
}

def int-to-ip [n: int]: nothing -> string {
    [($n // 16777216) (($n // 65536) mod 256) (($n // 256) mod 256) ($n mod 256)] | each {|o| $o | into string } | str join "."
}

# The kube-dns service address: the tenth address of the service CIDR, as kubeadm chooses it.
export def coredns-cluster-ip [service_cidr: string]: nothing -> string {
    if not ($service_cidr =~ '^(\d{1,3}\.){3}\d{1,3}/\d{1,2}$') { error make {msg: $"'($service_cidr)' is not an IPv4 CIDR such as 10.96.0.0/12"} }
    let parts = ($service_cidr | split row "/")
    let size = (2 ** (32 - ($parts.1 | into int)))
    let base = ($parts.0 | split row "." | each {|o| $o | into int } | reduce --fold 0 {|o, acc| $acc * 256 + $o })
    int-to-ip ((($base // $size) * $size) + 10)
}

# Problems with settings; empty when valid.
export def coredns-validate [settings: record]: nothing -> list<string> {
    let s = (coredns-defaults | merge $settings)
    mut errors = []
    if not ($s.dns_domain =~ '^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$') { $errors = ($errors | append $"dns_domain '($s.dns_domain)' is not a DNS domain") }
    if $s.replicas < 1 { $errors = ($errors | append "replicas must be at least 1") }
    if ($s.upstreams | is-empty) { $errors = ($errors | append "upstreams must name at least one resolver or /etc/resolv.conf") }
    if $s.cache_ttl < 0 or $s.cache_ttl > 3600 { $errors = ($errors | append $"cache_ttl ($s.cache_ttl) must be 0-3600 seconds") }
    for zone in ($s.stub_zones | transpose name servers) {
        if ($zone.servers | is-empty) { $errors = ($errors | append $"stub_zones.($zone.name) needs at least one server") }
    }
    if ($s.image_registry | is-empty) or ($s.image_registry | str contains "://") {
        $errors = ($errors | append $"image_registry '($s.image_registry)' must be a registry host such as registry.example.com, without a scheme")
    }
    $errors
}

# The Corefile, as text.
export def coredns-corefile [settings: record]: nothing -> string {
    let errors = (coredns-validate $settings)
    if ($errors | is-not-empty) { error make {msg: ($errors | str join "; ")} }
    let s = (coredns-defaults | merge $settings)
    let hosts = if ($s.hosts | is-empty) { [] } else {
        ["    hosts {"] | append ($s.hosts | transpose name ip | sort-by name | each {|h| $"        ($h.ip) ($h.name)" }) | append ["        fallthrough" "    }"]
    }
    let main = [
        ".:53 {" "    errors" "    health {" "        lameduck 5s" "    }" "    ready"
        $"    kubernetes ($s.dns_domain) in-addr.arpa ip6.arpa {" "        pods insecure" "        fallthrough in-addr.arpa ip6.arpa" "        ttl 30" "    }"
    ] | append $hosts | append [
        "    prometheus :9153"
        $"    forward . ($s.upstreams | str join ' ') {" "        max_concurrent 1000" "    }"
        $"    cache ($s.cache_ttl)" "    loop" "    reload" "    loadbalance" "}"
    ]
    let stubs = ($s.stub_zones | transpose name servers | sort-by name | each {|z|
        [$"($z.name):53 {" "    errors" $"    cache ($s.cache_ttl)" $"    forward . ($z.servers | str join ' ')" "}"]
    } | flatten)
    $main | append $stubs | str join "\n" | $in + "\n"
}

# Steps that replace the kubeadm-installed CoreDNS configuration and image. Images come from
# image_registry: <image_registry>/coredns, the name kubeadm uses for any registry but its own default.
export def coredns-install-plan [settings: record]: nothing -> list<record> {
    let s = (coredns-defaults | merge $settings)
    let corefile = (coredns-corefile $settings)
    [
        {name: "corefile", kind: "file", dest: "/etc/provisioning/coredns/Corefile", content: $corefile}
        {name: "configmap", kind: "run", run: "kubectl -n kube-system create configmap coredns --from-file=Corefile=/etc/provisioning/coredns/Corefile --dry-run=client -o yaml | kubectl apply -f -"}
        {name: "image", kind: "run", run: $"kubectl -n kube-system set image deployment/coredns coredns=($s.image_registry)/coredns:v($s.version)"}
        {name: "replicas", kind: "run", run: $"kubectl -n kube-system scale deployment/coredns --replicas=($s.replicas)"}
        {name: "rollout", kind: "run", run: "kubectl -n kube-system rollout restart deployment/coredns && kubectl -n kube-system rollout status deployment/coredns --timeout=3m"}
        {name: "resolve", kind: "run", run: $"kubectl run dnscheck --rm -i --restart=Never --image=($s.image_registry)/busybox:1.36 -- nslookup kubernetes.default.svc.($s.dns_domain) (coredns-cluster-ip $s.service_cidr)"}
    ]
}
