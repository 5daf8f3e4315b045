# Local provider: existing machines reached over SSH.
# Nothing is created: "create" registers a machine after probing it, and --check returns the probe.

const ROLES = ["control-plane", "worker", "etcd", "storage", "generic"]

def is-ipv4 [address: string]: nothing -> bool {
    let parts = ($address | split row ".")
    (($parts | length) == 4) and ($parts | all {|p| ($p =~ '^\d{1,3}$') and (($p | into int) <= 255) })
}

# Fill in defaults for one machine.
export def local-normalize [server: record]: nothing -> record {
    {user: "root", port: 22, roles: ["generic"], identity_file: null} | merge $server
}

# Problems with a list of machines; empty when they are valid.
export def local-validate [servers: list<record>]: nothing -> list<string> {
    mut errors = []
    for entry in ($servers | enumerate) {
        let s = (local-normalize $entry.item)
        let at = $"servers[($entry.index)]"
        if not (($s.name? | default "") =~ '^[a-z0-9]([a-z0-9-]*[a-z0-9])?$') {
            $errors = ($errors | append $"($at).name '($s.name? | default "")' must be a lower-case host name")
        }
        let address = ($s.address? | default "")
        if not ((is-ipv4 $address) or ($address =~ '^[a-z0-9.-]+\.[a-z]{2,}$')) {
            $errors = ($errors | append $"($at).address '($address)' must be an IPv4 address or a DNS name")
        }
        if $s.port < 1 or $s.port > 65535 { $errors = ($errors | append $"($at).port ($s.port) must be 1-65535") }
        let unknown = ($s.roles | where {|r| $r not-in $ROLES })
        if ($unknown | is-not-empty) {
            $errors = ($errors | append $"($at).roles ($unknown | str join ', ') unknown; use ($ROLES | str join ', ')")
        }
    }
    let names = ($servers | each {|s| $s.name? | default "" })
    let dupes = ($names | uniq --repeated)
    if ($dupes | is-not-empty) { $errors = ($errors | append $"duplicate names: ($dupes | str join ', ')") }
    $errors
}

# The ssh argv that runs `command` on a machine.
export def local-ssh-args [server: record, command: string]: nothing -> list<string> {
    let s = (local-normalize $server)
    mut argv = [ssh "-o" "BatchMode=yes" "-o" "StrictHostKeyChecking=accept-new" "-o" "ConnectTimeout=10" "-p" ($s.port | into string)]
    if ($s.identity_file | is-not-empty) { $argv = ($argv | append ["-i" $s.identity_file]) }
    $argv | append [$"($s.user)@($s.address)" $command]
}

# Machines grouped by role: {control-plane: [names], worker: [...], ...}; a machine may have several roles.
export def local-inventory [servers: list<record>]: nothing -> record {
    let normalized = ($servers | each {|s| local-normalize $s })
    $ROLES | reduce --fold {} {|role, acc|
        let members = ($normalized | where {|s| $role in $s.roles } | get name)
        if ($members | is-empty) { $acc } else { $acc | insert $role $members }
    }
}

# Lines for /etc/hosts, one per machine, sorted by name.
export def local-hosts-entries [servers: list<record>, --domain: string = ""]: nothing -> list<string> {
    $servers | sort-by name | each {|s|
        if ($domain | is-empty) { $"($s.address) ($s.name)" } else { $"($s.address) ($s.name).($domain) ($s.name)" }
    }
}

# Register a machine after probing it over SSH; with --check, return the probe instead.
export def local-create-server [server: record, --check]: nothing -> record {
    let errors = (local-validate [$server])
    if ($errors | is-not-empty) { error make {msg: ($errors | str join "; ")} }
    let probe = (local-ssh-args $server "uname -srm && nproc && awk '/MemTotal/ {print $2}' /proc/meminfo")
    if $check { return {name: $server.name, probe: $probe, dry_run: true} }
    let out = (run-external ...$probe | complete)
    if $out.exit_code != 0 { error make {msg: $"($server.name) is not reachable over SSH: ($out.stderr | str trim)"} }
    let lines = ($out.stdout | lines)
    {name: $server.name, probe: $probe, dry_run: false, kernel: $lines.0, cores: ($lines.1 | into int), memory_kb: ($lines.2 | into int)}
}
