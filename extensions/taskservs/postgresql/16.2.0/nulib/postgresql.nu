# PostgreSQL 16 task service: tuning, postgresql.conf, pg_hba rules and the install plan.

const MAJOR = 16

export def postgresql-defaults []: nothing -> record {
    {
        version: "16.2.0"
        port: 5432
        listen_addresses: ["localhost"]
        max_connections: 100
        memory_mb: 4096
        cpus: 2
        storage: "ssd"
        wal_level: "replica"
        ssl: true
        allowed_networks: []
        apt_repository: "https://packages.example.com/postgresql"
    }
}

# pgtune-style settings for a dedicated server; sizes in MB.
export def postgresql-tuning [memory_mb: int, cpus: int, max_connections: int, storage: string]: nothing -> record {
    let shared = ($memory_mb // 4)
    let workers = ([$cpus 2] | math max)
    let per_gather = ([($workers // 2) 1] | math max)
    {
        shared_buffers: $"($shared)MB"
        effective_cache_size: $"($memory_mb * 3 // 4)MB"
        maintenance_work_mem: $"([($memory_mb // 16) 2048] | math min)MB"
        work_mem: $"([(($memory_mb - $shared) * 1024 // ($max_connections * 3) // $per_gather) 64] | math max)kB"
        wal_buffers: $"([($shared * 3 // 100) 16] | math min)MB"
        random_page_cost: (if $storage == "hdd" { 4.0 } else { 1.1 })
        effective_io_concurrency: (if $storage == "hdd" { 2 } else { 200 })
        max_worker_processes: $workers
        max_parallel_workers: $workers
        max_parallel_workers_per_gather: $per_gather
        max_parallel_maintenance_workers: $per_gather
    }
}

# Problems with settings; empty when valid.
export def postgresql-validate [settings: record]: nothing -> list<string> {
    let s = (postgresql-defaults | merge $settings)
    mut errors = []
    if not ($s.version | str starts-with $"($MAJOR).") { $errors = ($errors | append $"version ($s.version) is not a PostgreSQL ($MAJOR) release") }
    if $s.port < 1024 or $s.port > 65535 { $errors = ($errors | append $"port ($s.port) must be 1024-65535") }
    if $s.memory_mb < 512 { $errors = ($errors | append $"memory_mb ($s.memory_mb) is below the 512 MB minimum") }
    if $s.max_connections < 10 or $s.max_connections > 5000 { $errors = ($errors | append $"max_connections ($s.max_connections) must be 10-5000; use a pooler beyond that") }
    if $s.storage not-in [ssd hdd] { $errors = ($errors | append $"storage ($s.storage) must be ssd or hdd") }
    if $s.wal_level not-in [minimal replica logical] { $errors = ($errors | append $"wal_level ($s.wal_level) must be minimal, replica or logical") }
    for net in $s.allowed_networks {
        if not ($net =~ '^(\d{1,3}\.){3}\d{1,3}/\d{1,2}$') { $errors = ($errors | append $"allowed_networks: '($net)' is not an IPv4 CIDR") }
    }
    if not ($s.apt_repository | str starts-with "https://") { $errors = ($errors | append $"apt_repository '($s.apt_repository)' must be an https URL, e.g. https://packages.example.com/postgresql") }
    $errors
}

# Settings written to conf.d/provisioning.conf.
export def postgresql-conf [settings: record]: nothing -> record {
    let s = (postgresql-defaults | merge $settings)
    {
        listen_addresses: ($s.listen_addresses | str join ",")
        port: $s.port
        max_connections: $s.max_connections
        wal_level: $s.wal_level
        ssl: (if $s.ssl { "on" } else { "off" })
        password_encryption: "scram-sha-256"
        vacuum_buffer_usage_limit: "2MB"
    } | merge (postgresql-tuning $s.memory_mb $s.cpus $s.max_connections $s.storage)
}

# pg_hba.conf rules: local peer for postgres, scram for allowed networks (hostssl when ssl is on).
export def postgresql-hba [settings: record]: nothing -> list<string> {
    let s = (postgresql-defaults | merge $settings)
    let kind = if $s.ssl { "hostssl" } else { "host" }
    [
        "local   all             postgres                                peer"
        "local   all             all                                     scram-sha-256"
        "host    all             all             127.0.0.1/32            scram-sha-256"
    ] | append ($s.allowed_networks | each {|net| $"($kind | fill -w 8)all             all             ($net | fill -w 24)scram-sha-256" })
}

# Ordered steps that install and configure the server. The PGDG apt repository (or your mirror of it)
# serves the packages and the repository's signing key, ACCC4CF8.asc.
export def postgresql-install-plan [settings: record]: nothing -> list<record> {
    let errors = (postgresql-validate $settings)
    if ($errors | is-not-empty) { error make {msg: ($errors | str join "; ")} }
    let s = (postgresql-defaults | merge $settings)
    let etc = $"/etc/postgresql/($MAJOR)/main"
    let repo = ($s.apt_repository | str trim --right --char "/")
    let key = "/usr/share/postgresql-common/pgdg/pgdg.asc"
    [
        {name: "repository", kind: "run", run: $"install -d /usr/share/postgresql-common/pgdg && curl -fsSLo ($key) ($repo)/ACCC4CF8.asc"}
        {name: "sources", kind: "run", run: $"echo \"deb [signed-by=($key)] ($repo) $\(. /etc/os-release && echo $VERSION_CODENAME\)-pgdg main\" > /etc/apt/sources.list.d/pgdg.list"}
        {name: "packages", kind: "run", run: $"apt-get update && apt-get install -y postgresql-($MAJOR) postgresql-client-($MAJOR)"}
        {name: "config", kind: "template", template: "postgresql.conf.j2", dest: $"($etc)/conf.d/provisioning.conf"}
        {name: "hba", kind: "file", dest: $"($etc)/pg_hba.conf", content: ((postgresql-hba $s | str join "\n") + "\n")}
        {name: "restart", kind: "run", run: $"systemctl restart postgresql@($MAJOR)-main"}
        {name: "password", kind: "run", run: "su postgres -c \"psql -v ON_ERROR_STOP=1 -c \\\"ALTER USER postgres PASSWORD '$POSTGRES_PASSWORD'\\\"\""}
        {name: "check", kind: "run", run: $"pg_isready -p ($s.port)"}
    ]
}
