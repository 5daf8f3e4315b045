use std/assert
use ../nulib/redis.nu *

assert equal (redis-maxmemory 1024 0.75) "768mb"
assert equal (redis-maxmemory 8192 0.6) "4915mb"
assert error { redis-maxmemory 1024 0.95 }

assert equal (redis-validate {}) []
let errors = (redis-validate {maxmemory_policy: "lru", appendfsync: "sometimes", bind: ["0.0.0.0"], maxmemory_fraction: 1.0})
assert equal $errors [
    "maxmemory_policy lru must be one of noeviction, allkeys-lru, allkeys-lfu, allkeys-random, volatile-lru, volatile-lfu, volatile-random, volatile-ttl"
    "appendfsync sometimes must be always, everysec or no"
    "maxmemory_fraction 1.0 must be above 0 and at most 0.9"
    "bind 0.0.0.0 listens beyond localhost; set requirepass = true and REDIS_PASSWORD"
]
assert equal (redis-validate {bind: ["0.0.0.0"], requirepass: true}) []

let local = (redis-conf-lines {})
assert equal $local.0 "bind 127.0.0.1 -::1"
assert equal $local.1 "protected-mode yes"
assert equal ("maxmemory 768mb" in $local) true
assert equal ("save 3600 1 300 100 60 10000" in $local) true
assert equal ($local | any {|l| $l | str starts-with "include" }) false

let networked = (redis-conf-lines {bind: ["127.0.0.1", "10.10.4.10"], requirepass: true, appendonly: false, memory_mb: 4096})
assert equal $networked.1 "protected-mode no"
assert equal ("appendonly no" in $networked) true
assert equal ("maxmemory 3072mb" in $networked) true
assert equal ($networked | last) "include /etc/redis/auth.conf"
assert error { redis-conf-lines {bind: ["10.0.0.1"]} }

let plan = (redis-install-plan {bind: ["10.10.4.10"], requirepass: true})
assert equal ($plan | get name) ["repository", "packages", "overcommit", "config", "password", "restart", "check"]
assert equal $plan.0.run "curl -fsSL https://packages.example.com/redis/gpg | gpg --dearmor --yes -o /usr/share/keyrings/redis-archive-keyring.gpg && echo \"deb [signed-by=/usr/share/keyrings/redis-archive-keyring.gpg] https://packages.example.com/redis/deb $(lsb_release -cs) main\" > /etc/apt/sources.list.d/redis.list"
assert str contains (redis-install-plan {apt_repository: "https://mirror.example.com/redis/"} | get 0.run) "curl -fsSL https://mirror.example.com/redis/gpg | "
assert equal (redis-validate {apt_repository: "http://mirror.example.com/redis"}) ["apt_repository 'http://mirror.example.com/redis' must be an https URL, e.g. https://packages.example.com/redis"]
assert str contains $plan.1.run "redis-server=6:7.2.4-1rl1~"
assert equal ($plan.4.run | str contains "s3cret") false
assert str contains $plan.6.run "-a \"$REDIS_PASSWORD\""
assert equal (redis-install-plan {} | get name | any {|n| $n == "password" }) false
