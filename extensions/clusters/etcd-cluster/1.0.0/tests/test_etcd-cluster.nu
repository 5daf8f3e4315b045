use std/assert
use ../nulib/etcd-cluster.nu *

assert equal ([1 3 5 7] | each {|n| etcd-cluster-quorum $n }) [1 2 3 4]
assert equal ([1 3 4 5 7] | each {|n| etcd-cluster-fault-tolerance $n }) [0 1 1 2 3]

let members = [
    {name: "etcd-0", address: "10.10.0.10", zone: "a"}
    {name: "etcd-1", address: "10.10.0.11", zone: "b"}
    {name: "etcd-2", address: "10.10.0.12", zone: "c"}
]
assert equal (etcd-cluster-validate {members: $members}) []
assert equal (etcd-cluster-validate {members: ($members | first 2)}) ["members: 2; an etcd cluster needs 3, 5 or 7 members"]
let two_in_a = ($members | update 1.zone "a")
assert equal (etcd-cluster-validate {members: $two_in_a}) ["zone a holds 2 of 3 members; losing it loses quorum"]
let dup = ($members | update 2.name "etcd-0" | update 2.address "10.10.0.10")
assert equal (etcd-cluster-validate {members: $dup, backup_keep: 0}) ["members: duplicate name etcd-0", "members: duplicate address 10.10.0.10", "backup_keep must be at least 1"]

let certs = (etcd-cluster-certificates {members: $members})
assert equal ($certs | get file) ["ca", "etcd-0", "etcd-0-peer", "etcd-1", "etcd-1-peer", "etcd-2", "etcd-2-peer", "apiserver-etcd-client"]
assert equal ($certs | where file == "etcd-1" | first | get ips) ["10.10.0.11", "127.0.0.1"]
assert equal ($certs | where file == "etcd-1" | first | get dns) ["etcd-1", "localhost"]
assert equal ($certs | last | get usage) "client"

let ca_cmd = (etcd-cluster-openssl-commands ($certs | first))
assert equal ($ca_cmd | length) 1
assert str contains $ca_cmd.0 "test -f /etc/etcd/pki/ca.key || openssl req -x509"
let peer_cmds = (etcd-cluster-openssl-commands ($certs | get 2) --pki-dir "/srv/pki" --days 365)
assert equal ($peer_cmds | length) 2
assert str contains $peer_cmds.1 "-CA /srv/pki/ca.crt -CAkey /srv/pki/ca.key"
assert str contains $peer_cmds.1 "-days 365 -extfile /srv/pki/etcd-0-peer.cnf -extensions peer"

let plan = (etcd-cluster-plan {name: "k8s-etcd", members: $members})
assert equal ($plan | where kind == "template" and template == "openssl-member.cnf.j2" | length) 7
assert equal ($plan | where name =~ "^copy pki" | get name) ["copy pki etcd-1", "copy pki etcd-2"]
let install = ($plan | where kind == "taskserv" | first)
assert equal $install.taskserv "etcd"
assert equal $install.settings.cluster_token "k8s-etcd-cluster"
assert equal $install.settings.nodes [{name: "etcd-0", address: "10.10.0.10"}, {name: "etcd-1", address: "10.10.0.11"}, {name: "etcd-2", address: "10.10.0.12"}]
assert str contains ($plan | where name == "health" | first | get run) "--endpoints=https://10.10.0.10:2379,https://10.10.0.11:2379,https://10.10.0.12:2379"
assert equal ($plan | last | get name) "backup timer"
assert error { etcd-cluster-plan {members: ($members | first 1)} }
