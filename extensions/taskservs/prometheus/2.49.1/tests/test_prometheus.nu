use std/assert
use ../nulib/prometheus.nu *

assert equal (prometheus-duration-seconds "30s") 30.0
assert equal (prometheus-duration-seconds "1h30m") 5400.0
assert equal (prometheus-duration-seconds "15d") 1296000.0
assert equal (prometheus-duration-seconds "500ms") 0.5
assert error { prometheus-duration-seconds "15 days" }

assert equal (prometheus-node-job [{name: "a", address: "10.0.0.1"}, {name: "b", address: "10.0.0.2"}] --port 9101).targets ["10.0.0.1:9101", "10.0.0.2:9101"]

assert equal (prometheus-validate {}) []
let errors = (prometheus-validate {scrape_interval: "10s", scrape_timeout: "15s", retention_size: "50G", jobs: [{name: "x", targets: ["a:1"]}, {name: "x", targets: ["nohost"]}]})
assert equal $errors [
    "scrape_timeout 15s must not exceed scrape_interval 10s"
    "retention_size '50G' must look like 50GB"
    "jobs: duplicate names x"
    "jobs.x: targets nohost must be host:port"
]
assert equal (prometheus-validate {retention_time: "2 weeks"}) ["retention_time '2 weeks' is not a Prometheus duration"]

let cfg = (prometheus-config {
    external_labels: {cluster: "prod-eu"}
    alertmanagers: ["10.10.5.20:9093"]
    jobs: [{name: "etcd", targets: ["10.10.0.10:2379"], scheme: "https", interval: "15s"}]
} | to yaml | from yaml)
assert equal $cfg.global.external_labels {cluster: "prod-eu"}
assert equal ($cfg.scrape_configs | get job_name) ["prometheus", "etcd"]
assert equal $cfg.scrape_configs.0.static_configs.0.targets ["localhost:9090"]
assert equal $cfg.scrape_configs.1.scheme "https"
assert equal $cfg.scrape_configs.1.scrape_interval "15s"
assert equal $cfg.alerting.alertmanagers.0.static_configs.0.targets ["10.10.5.20:9093"]
assert equal ("alerting" in (prometheus-config {})) false

assert equal (prometheus-flags {retention_size: "50GB"} | where {|f| $f | str starts-with "--storage.tsdb.retention" }) ["--storage.tsdb.retention.time=15d", "--storage.tsdb.retention.size=50GB"]
assert equal (prometheus-flags {} | any {|f| $f | str contains "retention.size" }) false

let plan = (prometheus-install-plan {listen: "0.0.0.0:9091"})
assert equal ($plan | get name) ["user", "download", "binaries", "directories", "config", "check config", "unit", "start", "ready"]
assert str contains $plan.1.run "v2.49.1/prometheus-2.49.1.linux-amd64.tar.gz"
assert equal ($plan.4.content | from yaml | get scrape_configs.0.static_configs.0.targets) ["localhost:9091"]
assert equal $plan.8.run "curl -fsS http://localhost:9091/-/ready"
