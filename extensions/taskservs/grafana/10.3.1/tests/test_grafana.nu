use std/assert
use ../nulib/grafana.nu *

assert equal (grafana-validate {}) []
let errors = (grafana-validate {http_port: 0, prometheus_url: "prometheus:9090", datasources: [{name: "Prometheus", type: "influxdb", url: "ftp://x"}]})
assert equal $errors [
    "http_port 0 must be 1-65535"
    "prometheus_url 'prometheus:9090' must be an http or https URL"
    "datasources.Prometheus: type influxdb must be one of prometheus, loki, tempo, alertmanager, postgres, elasticsearch"
    "datasources.Prometheus: url must be an http or https URL"
    "datasources: duplicate names Prometheus"
]

let ds = (grafana-datasources {prometheus_url: "http://10.10.5.10:9090", scrape_interval: "15s", datasources: [{name: "Loki Logs", type: "loki", url: "http://10.10.5.11:3100"}]})
assert equal $ds.apiVersion 1
assert equal ($ds.datasources | get name) ["Prometheus", "Loki Logs"]
assert equal ($ds.datasources | where isDefault | length) 1
assert equal $ds.datasources.0.url "http://10.10.5.10:9090"
assert equal $ds.datasources.0.jsonData.timeInterval "15s"
assert equal $ds.datasources.1.uid "loki-logs"
assert error { grafana-datasources {datasources: [{name: "x", type: "graphite", url: "http://g"}]} }

let ini = (grafana-ini-lines {domain: "grafana.example.internal", http_port: 3001, anonymous: true})
assert equal ("root_url = http://grafana.example.internal:3001/" in $ini) true
assert equal ("admin_password = $__env{GRAFANA_ADMIN_PASSWORD}" in $ini) true
assert equal ($ini | skip until {|l| $l == "[auth.anonymous]" } | get 1) "enabled = true"
assert equal ($ini | skip until {|l| $l == "[users]" } | get 1) "allow_sign_up = false"
assert equal ("root_url = https://g.example/" in (grafana-ini-lines {root_url: "https://g.example/"})) true

let plan = (grafana-install-plan {plugins: ["grafana-clock-panel"]})
assert equal ($plan | get name) ["repository", "packages", "config", "password", "unit override", "datasources", "plugin grafana-clock-panel", "start", "health"]
assert str contains $plan.0.run "curl -fsSL https://packages.example.com/grafana/gpg.key | gpg --dearmor"
assert str contains $plan.0.run "echo 'deb [signed-by=/etc/apt/keyrings/grafana.gpg] https://packages.example.com/grafana stable main' > /etc/apt/sources.list.d/grafana.list"
assert str contains (grafana-install-plan {apt_repository: "https://mirror.example.com/grafana/"} | get 0.run) "] https://mirror.example.com/grafana stable main'"
assert equal (grafana-validate {apt_repository: "http://packages.example.com/grafana"}) ["apt_repository 'http://packages.example.com/grafana' must be an https URL, e.g. https://packages.example.com/grafana"]
assert error { grafana-install-plan {apt_repository: "packages.example.com/grafana"} }
assert str contains $plan.1.run "grafana=10.3.1"
assert equal ($plan.5.content | from yaml | get datasources.0.type) "prometheus"
assert str contains $plan.4.content "EnvironmentFile=/etc/grafana/admin.env"
assert equal $plan.8.run "curl -fsS http://localhost:3000/api/health"
