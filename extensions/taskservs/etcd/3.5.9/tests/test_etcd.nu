use std/assert
use ../nulib/etcd.nu *

let three = {nodes: [
    {name: "etcd-0", address: "10.10.0.10"}
    {name: "etcd-1", address: "10.10.0.11"}
    {name: "etcd-2", address: "10.10.0.12"}
]}

assert equal (etcd-validate $three) []
let errors = (etcd-validate {nodes: [{name: "a", address: "10.0.0.1"}, {name: "a", address: "10.0.0.2"}], peer_port: 2379, election_timeout: 400})
assert equal ($errors | length) 4
assert str contains $errors.0 "nodes: 2 members; use an odd number"
assert equal $errors.1 "nodes: duplicate names a"
assert equal $errors.2 "client_port and peer_port must differ"
assert str contains $errors.3 "election_timeout 400 must be at least 5 x heartbeat_interval 100"
assert str contains (etcd-validate {nodes: []} | first) "nodes: 0 members"

assert equal (etcd-initial-cluster $three) "etcd-0=https://10.10.0.10:2380,etcd-1=https://10.10.0.11:2380,etcd-2=https://10.10.0.12:2380"
assert equal (etcd-endpoints ($three | merge {tls: false, client_port: 12379})) ["http://10.10.0.10:12379", "http://10.10.0.11:12379", "http://10.10.0.12:12379"]

let cfg = (etcd-member-config $three "etcd-1")
assert equal $cfg.name "etcd-1"
assert equal $cfg.advertise-client-urls "https://10.10.0.11:2379"
assert equal $cfg.quota-backend-bytes 2147483648
assert equal $cfg.client-transport-security.cert-file "/etc/etcd/pki/etcd-1.crt"
assert equal $cfg.peer-transport-security.key-file "/etc/etcd/pki/etcd-1-peer.key"
assert equal ("client-transport-security" in (etcd-member-config ($three | merge {tls: false}) "etcd-0")) false
assert error { etcd-member-config $three "etcd-9" }

let plan = (etcd-install-plan $three "etcd-2")
assert equal ($plan | get name) ["user", "download", "unpack", "directories", "config", "unit", "start", "health"]
assert str contains $plan.1.run "releases/download/v3.5.9/etcd-v3.5.9-linux-amd64.tar.gz"
assert equal ($plan.4.content | from yaml | get name) "etcd-2"
assert str contains $plan.7.run "--cert /etc/etcd/pki/etcd-2.crt"
assert error { etcd-install-plan {nodes: []} "x" }

# 3.5.9 runs the initial corruption check but not the compaction hash check
assert equal $cfg.experimental-initial-corrupt-check true
assert equal ("experimental-compact-hash-check-enabled" in $cfg) false
