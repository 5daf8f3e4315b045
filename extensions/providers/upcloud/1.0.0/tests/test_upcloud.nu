use std/assert
use ../nulib/upcloud.nu *

# plan selection picks the smallest plan that fits
assert equal (upcloud-plan-for 1 1) "1xCPU-1GB"
assert equal (upcloud-plan-for 2 3) "2xCPU-4GB"
assert equal (upcloud-plan-for 5 8) "6xCPU-16GB"
assert error { upcloud-plan-for 64 512 }

# required credentials
assert equal (upcloud-missing-env {}) ["UPCLOUD_USERNAME", "UPCLOUD_PASSWORD"]
assert equal (upcloud-missing-env {UPCLOUD_USERNAME: "ops", UPCLOUD_PASSWORD: " "}) ["UPCLOUD_PASSWORD"]
assert equal (upcloud-missing-env {UPCLOUD_USERNAME: "ops", UPCLOUD_PASSWORD: "s3cret"}) []

# validation
assert equal (upcloud-validate {hostname: "web-1", zone: "fi-hel1", plan: "2xCPU-4GB"}) []
let errors = (upcloud-validate {hostname: "Web_1", zone: "mars-1", storage_gb: 5})
assert equal ($errors | length) 3
assert str contains $errors.0 "hostname 'Web_1'"
assert str contains $errors.1 "zone 'mars-1' is unknown"
assert str contains $errors.2 "storage_gb 5"

# the create request, in dry-run mode
let req = (upcloud-create-server {hostname: "web-1", zone: "nl-ams1", plan: "2xCPU-4GB", storage_gb: 50, labels: {env: "dev"}, ssh_keys: ["ssh-ed25519 AAAA ops"]} --check)
assert equal $req.method "POST"
assert equal $req.url "https://api.upcloud.com/1.3/server"
assert equal $req.dry_run true
let server = $req.body.server
assert equal $server.zone "nl-ams1"
assert equal $server.title "web-1"
assert equal $server.storage_devices.storage_device.0.size 50
assert equal $server.storage_devices.storage_device.0.action "clone"
assert equal $server.login_user.ssh_keys.ssh_key ["ssh-ed25519 AAAA ops"]
assert equal $server.labels.label [{key: "env", value: "dev"}]
assert equal ("user_data" in $server) false
assert error { upcloud-create-server {hostname: "web-1", plan: "huge"} --check }

# delete is a soft stop followed by a delete with storages
let del = (upcloud-delete-server "00b1e3a0-5c5e-4a4f-9c57-3f2c1e1d0a01" --check --api-url "https://api.test/1.3")
assert equal ($del | get method) ["POST", "DELETE"]
assert equal $del.1.url "https://api.test/1.3/server/00b1e3a0-5c5e-4a4f-9c57-3f2c1e1d0a01?storages=1&backups=delete"
