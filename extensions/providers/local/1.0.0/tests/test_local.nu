use std/assert
use ../nulib/local.nu *

let servers = [
    {name: "node-1", address: "192.168.56.11", roles: ["control-plane", "etcd"]}
    {name: "node-2", address: "192.168.56.12", roles: ["worker"], identity_file: "~/.ssh/lab"}
    {name: "node-3", address: "node-3.lab.example", user: "ubuntu", port: 2222, roles: ["worker"]}
]

assert equal (local-validate $servers) []
assert equal (local-normalize {name: "a", address: "10.0.0.1"}) {user: "root", port: 22, roles: ["generic"], identity_file: null, name: "a", address: "10.0.0.1"}

let errors = (local-validate [
    {name: "Node_1", address: "300.1.1.1", port: 70000, roles: ["master"]}
    {name: "dup", address: "10.0.0.2"}
    {name: "dup", address: "10.0.0.3"}
])
assert equal ($errors | length) 5
assert str contains $errors.0 "servers[0].name 'Node_1'"
assert str contains $errors.1 "servers[0].address '300.1.1.1'"
assert str contains $errors.2 "servers[0].port 70000"
assert str contains $errors.3 "servers[0].roles master unknown"
assert equal $errors.4 "duplicate names: dup"

assert equal (local-ssh-args $servers.2 "true") [ssh "-o" "BatchMode=yes" "-o" "StrictHostKeyChecking=accept-new" "-o" "ConnectTimeout=10" "-p" "2222" "ubuntu@node-3.lab.example" "true"]
assert equal (local-ssh-args $servers.1 "true" | skip 9 | first 2) ["-i" "~/.ssh/lab"]

assert equal (local-inventory $servers) {control-plane: ["node-1"], worker: ["node-2", "node-3"], etcd: ["node-1"]}
assert equal (local-hosts-entries ($servers | reverse) --domain "lab") ["192.168.56.11 node-1.lab node-1", "192.168.56.12 node-2.lab node-2", "node-3.lab.example node-3.lab node-3"]

let planned = (local-create-server $servers.0 --check)
assert equal $planned.dry_run true
assert equal ($planned.probe | get 9) "root@192.168.56.11"
assert error { local-create-server {name: "x", address: ""} --check }
