# UpCloud provider: plan selection, validation and API 1.3 requests.
# Everything that talks to the API accepts --check and then returns the request instead.

const API_URL = "https://api.upcloud.com/1.3"
const REQUIRED_ENV = ["UPCLOUD_USERNAME", "UPCLOUD_PASSWORD"]

# Zones this provider accepts.
export def upcloud-zones []: nothing -> list<string> {
    [de-fra1 fi-hel1 fi-hel2 nl-ams1 uk-lon1 pl-waw1 es-mad1 se-sto1 us-chi1 us-nyc1 us-sjo1 sg-sin1 au-syd1]
}

# General purpose plans, smallest first.
export def upcloud-plans []: nothing -> table {
    [
        [name cores memory_gb disk_gb];
        ["1xCPU-1GB" 1 1 25]
        ["1xCPU-2GB" 1 2 50]
        ["2xCPU-4GB" 2 4 80]
        ["4xCPU-8GB" 4 8 160]
        ["6xCPU-16GB" 6 16 320]
        ["8xCPU-32GB" 8 32 640]
        ["12xCPU-48GB" 12 48 960]
    ]
}

# The smallest plan with at least `cores` cores and `memory_gb` GiB of memory.
export def upcloud-plan-for [cores: int, memory_gb: int]: nothing -> string {
    let fits = (upcloud-plans | where cores >= $cores and memory_gb >= $memory_gb)
    if ($fits | is-empty) {
        error make {msg: $"no UpCloud plan has ($cores) cores and ($memory_gb) GB; the largest is 12xCPU-48GB"}
    }
    $fits | first | get name
}

# Names of required environment variables that are missing or empty in `vars` (pass $env).
export def upcloud-missing-env [vars: record]: nothing -> list<string> {
    $REQUIRED_ENV | where {|name| ($vars | get -o $name | default "" | str trim | is-empty) }
}

# Problems with a server definition; an empty list means it is valid.
export def upcloud-validate [server: record]: nothing -> list<string> {
    mut errors = []
    let hostname = ($server.hostname? | default "")
    if not ($hostname =~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$') {
        $errors = ($errors | append $"hostname '($hostname)' must be 1-63 characters of a-z, 0-9 and '-'")
    }
    let zone = ($server.zone? | default "de-fra1")
    if $zone not-in (upcloud-zones) {
        $errors = ($errors | append $"zone '($zone)' is unknown; use one of (upcloud-zones | str join ', ')")
    }
    let plan = ($server.plan? | default "1xCPU-2GB")
    if $plan not-in (upcloud-plans | get name) {
        $errors = ($errors | append $"plan '($plan)' is unknown; use one of (upcloud-plans | get name | str join ', ')")
    }
    let size = ($server.storage_gb? | default 25)
    if $size < 10 or $size > 4096 {
        $errors = ($errors | append $"storage_gb ($size) must be between 10 and 4096")
    }
    $errors
}

# The JSON body of POST /1.3/server for a server definition.
export def upcloud-server-request [server: record]: nothing -> record {
    let errors = (upcloud-validate $server)
    if ($errors | is-not-empty) { error make {msg: ($errors | str join "; ")} }
    let body = {
        zone: ($server.zone? | default "de-fra1")
        title: ($server.title? | default $server.hostname)
        hostname: $server.hostname
        plan: ($server.plan? | default "1xCPU-2GB")
        metadata: "yes"
        storage_devices: {storage_device: [{
            action: "clone"
            storage: ($server.template? | default "01000000-0000-4000-8000-000030220200")
            title: $"($server.hostname)-disk0"
            size: ($server.storage_gb? | default 25)
            tier: ($server.storage_tier? | default "maxiops")
        }]}
        login_user: {username: "root", create_password: "no", ssh_keys: {ssh_key: ($server.ssh_keys? | default [])}}
        labels: {label: ($server.labels? | default {} | transpose key value)}
    }
    let body = if ($server.user_data? | is-not-empty) { $body | insert user_data $server.user_data } else { $body }
    {server: $body}
}

# Create a server; with --check, return the request that would be sent.
export def upcloud-create-server [server: record, --check, --api-url: string = $API_URL]: nothing -> record {
    let request = {method: "POST", url: $"($api_url)/server", body: (upcloud-server-request $server)}
    if $check { return ($request | insert dry_run true) }
    let missing = (upcloud-missing-env $env)
    if ($missing | is-not-empty) { error make {msg: $"set ($missing | str join ', ') to use the UpCloud API"} }
    http post --content-type application/json --user $env.UPCLOUD_USERNAME --password $env.UPCLOUD_PASSWORD $request.url $request.body
}

# Stop and delete a server with its storage; with --check, return the requests.
export def upcloud-delete-server [uuid: string, --check, --api-url: string = $API_URL]: nothing -> list<record> {
    let requests = [
        {method: "POST", url: $"($api_url)/server/($uuid)/stop", body: {stop_server: {stop_type: "soft", timeout: "60"}}}
        {method: "DELETE", url: $"($api_url)/server/($uuid)?storages=1&backups=delete", body: null}
    ]
    if $check { return $requests }
    let missing = (upcloud-missing-env $env)
    if ($missing | is-not-empty) { error make {msg: $"set ($missing | str join ', ') to use the UpCloud API"} }
    http post --content-type application/json --user $env.UPCLOUD_USERNAME --password $env.UPCLOUD_PASSWORD $requests.0.url $requests.0.body
    http delete --user $env.UPCLOUD_USERNAME --password $env.UPCLOUD_PASSWORD $requests.1.url
    $requests
}
