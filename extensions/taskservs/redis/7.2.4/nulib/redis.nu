# Redis 7.2 task service: memory sizing, redis.conf and the install plan.

const POLICIES = [noeviction allkeys-lru allkeys-lfu allkeys-random volatile-lru volatile-lfu volatile-random volatile-ttl]

export def redis-defaults []: nothing -> record {
    {
        version: "7.2.4"
        port: 6379
        bind: ["127.0.0.1", "-::1"]
        memory_mb: 1024
        maxmemory_fraction: 0.75
        maxmemory_policy: "allkeys-lru"
        appendonly: true
        appendfsync: "everysec"
        snapshots: [[seconds changes]; [3600 1] [300 100] [60 10000]]
        requirepass: false
        databases: 16
        apt_repository: "https://packages.example.com/redis"
    }
}

# maxmemory in redis units for a host with `memory_mb` of RAM (leaves room for fork and fragmentation).
export def redis-maxmemory [memory_mb: int, fraction: float]: nothing -> string {
    if $fraction <= 0.0 or $fraction > 0.9 { error make {msg: $"maxmemory_fraction ($fraction) must be above 0 and at most 0.9"} }
    $"(($memory_mb * $fraction) | math floor)mb"
}

def is-local [address: string]: nothing -> bool {
    ($address | str trim --left --char "-") in ["127.0.0.1", "::1", "localhost"]
}

# Problems with settings; empty when valid.
export def redis-validate [settings: record]: nothing -> list<string> {
    let s = (redis-defaults | merge $settings)
    mut errors = []
    if $s.port < 1 or $s.port > 65535 { $errors = ($errors | append $"port ($s.port) must be 1-65535") }
    if $s.maxmemory_policy not-in $POLICIES { $errors = ($errors | append $"maxmemory_policy ($s.maxmemory_policy) must be one of ($POLICIES | str join ', ')") }
    if $s.appendfsync not-in [always everysec no] { $errors = ($errors | append $"appendfsync ($s.appendfsync) must be always, everysec or no") }
    if $s.maxmemory_fraction <= 0.0 or $s.maxmemory_fraction > 0.9 { $errors = ($errors | append $"maxmemory_fraction ($s.maxmemory_fraction) must be above 0 and at most 0.9") }
    let public = ($s.bind | where {|a| not (is-local $a) })
    if ($public | is-not-empty) and not $s.requirepass {
        $errors = ($errors | append $"bind ($public | str join ' ') listens beyond localhost; set requirepass = true and REDIS_PASSWORD")
    }
    if not ($s.apt_repository | str starts-with "https://") { $errors = ($errors | append $"apt_repository '($s.apt_repository)' must be an https URL, e.g. https://packages.example.com/redis") }
    $errors
}

# redis.conf as lines. The password is included from a separate file written from REDIS_PASSWORD.
export def redis-conf-lines [settings: record]: nothing -> list<string> {
    let errors = (redis-validate $settings)
    if ($errors | is-not-empty) { error make {msg: ($errors | str join "; ")} }
    let s = (redis-defaults | merge $settings)
    [
        $"bind ($s.bind | str join ' ')"
        $"protected-mode (if $s.requirepass { 'no' } else { 'yes' })"
        $"port ($s.port)"
        "supervised systemd"
        "dir /var/lib/redis"
        $"databases ($s.databases)"
        $"maxmemory (redis-maxmemory $s.memory_mb $s.maxmemory_fraction)"
        $"maxmemory-policy ($s.maxmemory_policy)"
        $"save ($s.snapshots | each {|p| $'($p.seconds) ($p.changes)' } | str join ' ')"
        $"appendonly (if $s.appendonly { 'yes' } else { 'no' })"
        $"appendfsync ($s.appendfsync)"
    ] | append (if $s.requirepass { ["include /etc/redis/auth.conf"] } else { [] })
}

# Ordered steps that install and start Redis. The Redis apt repository (or your mirror of it) is laid
# out as upstream: the signing key at <apt_repository>/gpg, the packages under <apt_repository>/deb.
export def redis-install-plan [settings: record]: nothing -> list<record> {
    let s = (redis-defaults | merge $settings)
    let conf = ((redis-conf-lines $settings | str join "\n") + "\n")
    let repo = ($s.apt_repository | str trim --right --char "/")
    let auth = if $s.requirepass {
        [{name: "password", kind: "run", run: "umask 077 && printf 'requirepass %s\\n' \"$REDIS_PASSWORD\" > /etc/redis/auth.conf && chown redis:redis /etc/redis/auth.conf"}]
    } else { [] }
    [
        {name: "repository", kind: "run", run: $"curl -fsSL ($repo)/gpg | gpg --dearmor --yes -o /usr/share/keyrings/redis-archive-keyring.gpg && echo \"deb [signed-by=/usr/share/keyrings/redis-archive-keyring.gpg] ($repo)/deb $\(lsb_release -cs\) main\" > /etc/apt/sources.list.d/redis.list"}
        {name: "packages", kind: "run", run: $"apt-get update && apt-get install -y redis-server=6:($s.version)-1rl1~$\(lsb_release -cs\)1 redis-tools=6:($s.version)-1rl1~$\(lsb_release -cs\)1"}
        {name: "overcommit", kind: "run", run: "echo 'vm.overcommit_memory = 1' > /etc/sysctl.d/60-redis.conf && sysctl -p /etc/sysctl.d/60-redis.conf"}
        {name: "config", kind: "file", dest: "/etc/redis/redis.conf", content: $conf}
    ] | append $auth | append [
        {name: "restart", kind: "run", run: "systemctl enable redis-server && systemctl restart redis-server"}
        {name: "check", kind: "run", run: $"redis-cli -p ($s.port) (if $s.requirepass { '-a "$REDIS_PASSWORD" --no-auth-warning ' } else { '' })ping"}
    ]
}
