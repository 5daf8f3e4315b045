use std/assert
use ../nulib/postgresql.nu *

# tuning for 16 GB, 8 CPUs, 200 connections on SSD
let t = (postgresql-tuning 16384 8 200 "ssd")
assert equal $t.shared_buffers "4096MB"
assert equal $t.effective_cache_size "12288MB"
assert equal $t.maintenance_work_mem "1024MB"
assert equal $t.work_mem "5242kB"
assert equal $t.wal_buffers "16MB"
assert equal $t.random_page_cost 1.1
assert equal $t.effective_io_concurrency 200
assert equal [$t.max_worker_processes $t.max_parallel_workers_per_gather] [8 4]
# small HDD box: floors and caps apply
let small = (postgresql-tuning 1024 1 100 "hdd")
assert equal $small.maintenance_work_mem "64MB"
assert equal $small.wal_buffers "7MB"
assert equal $small.random_page_cost 4.0
assert equal [$small.max_worker_processes $small.max_parallel_workers_per_gather] [2 1]
assert equal (postgresql-tuning 65536 16 100 "ssd" | get maintenance_work_mem) "2048MB"

assert equal (postgresql-validate {}) []
let errors = (postgresql-validate {version: "16.2.0", port: 80, memory_mb: 256, max_connections: 9000, storage: "nvme", allowed_networks: ["office"]})
assert equal ($errors | length) 6
assert equal $errors.0 "version 16.2.0 is not a PostgreSQL 15 release"
assert str contains $errors.4 "storage nvme"
assert equal $errors.5 "allowed_networks: 'office' is not an IPv4 CIDR"

let conf = (postgresql-conf {listen_addresses: ["localhost", "10.10.3.10"], memory_mb: 8192})
assert equal $conf.listen_addresses "localhost,10.10.3.10"
assert equal $conf.shared_buffers "2048MB"
assert equal $conf.password_encryption "scram-sha-256"
# vacuum_buffer_usage_limit only exists from PostgreSQL 16 on
assert equal ("vacuum_buffer_usage_limit" in $conf) false

let hba = (postgresql-hba {allowed_networks: ["10.10.0.0/16"]})
assert equal ($hba | length) 4
assert equal ($hba | last | split row -r '\s+') ["hostssl", "all", "all", "10.10.0.0/16", "scram-sha-256"]
assert equal (postgresql-hba {ssl: false, allowed_networks: ["10.0.0.0/8"]} | last | split row -r '\s+' | first) "host"

let plan = (postgresql-install-plan {allowed_networks: ["10.10.0.0/16"]})
assert equal ($plan | get name) ["repository", "sources", "packages", "config", "hba", "restart", "password", "check"]
assert equal $plan.0.run "install -d /usr/share/postgresql-common/pgdg && curl -fsSLo /usr/share/postgresql-common/pgdg/pgdg.asc https://packages.example.com/postgresql/ACCC4CF8.asc"
assert equal $plan.1.run "echo \"deb [signed-by=/usr/share/postgresql-common/pgdg/pgdg.asc] https://packages.example.com/postgresql $(. /etc/os-release && echo $VERSION_CODENAME)-pgdg main\" > /etc/apt/sources.list.d/pgdg.list"
assert str contains (postgresql-install-plan {apt_repository: "https://mirror.example.com/pgdg/"} | get 1.run) "] https://mirror.example.com/pgdg $("
assert equal (postgresql-validate {apt_repository: "ftp://mirror.example.com/pgdg"}) ["apt_repository 'ftp://mirror.example.com/pgdg' must be an https URL, e.g. https://packages.example.com/postgresql"]
assert str contains $plan.2.run "postgresql-15 postgresql-client-15"
assert equal $plan.3.dest "/etc/postgresql/15/main/conf.d/provisioning.conf"
assert equal ($plan.4.content | lines | length) 4
# the password comes from the environment at run time, never from the plan
assert str contains $plan.6.run "$POSTGRES_PASSWORD"
assert error { postgresql-install-plan {port: 22} }
