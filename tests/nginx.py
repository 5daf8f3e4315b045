"""A private nginx (Debian's `nginx`, `make services`) for the tests and the benchmark: one master
process on free ports, its configuration, logs and temporary files in its own directory, stopped
at the end. `deploy_server_block` is the nginx configuration of docs/deploy.md (its first
```nginx block) with that page's placeholders replaced, so the documented configuration is the
one that is tested.

    nginx = Nginx(tmp_path / "nginx", servers=[deploy_server_block(port=P, upstream="127.0.0.1:Q",
                                                                   data_dir=registry.data_dir)])
    nginx.start()
    ...
    nginx.stop()

`deploy_s3_server_block` is the page's configuration for S3 (several web nodes; index documents
and signed metadata from the bucket), and `deploy_bucket_policy` the bucket policy it needs;
`make cluster` (the `cluster` package) runs them. `nginx_conf` is the whole configuration file
both run nginx with.
"""

from __future__ import annotations

import atexit
import http.client
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.services import BASE_DIR, HOST, stop_process_group

DEPLOY_DOC = BASE_DIR / "docs" / "deploy.md"
# gunicorn's --keep-alive behind nginx, as docs/deploy.md runs it: longer than nginx's
# keepalive_timeout for its upstream connections, so that nginx closes an idle one first (the other
# way round, a request nginx sends as gunicorn closes gets a 502).
GUNICORN_KEEP_ALIVE = 75

# The placeholders of docs/deploy.md's nginx configuration.
DOC_LISTEN = "listen 80;"
DOC_UPSTREAM = "127.0.0.1:8000"
DOC_DATA_DIR = "/var/lib/registry"


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)


def _doc_block(language: str, containing: str = "") -> str:
    """The first ```LANGUAGE block of docs/deploy.md (that contains ``containing``)."""
    text = DEPLOY_DOC.read_text(encoding="utf-8")
    for match in re.finditer(rf"```{language}\n(.*?)```", text, re.DOTALL):
        if containing in match.group(1):
            return match.group(1)
    raise AssertionError(f"docs/deploy.md has no ```{language} block" + (f" with {containing!r}" if containing else ""))


def doc_nginx_keepalive_timeouts() -> list[int]:
    """The keepalive_timeout (seconds) of each upstream block in docs/deploy.md."""
    text = DEPLOY_DOC.read_text(encoding="utf-8")
    return [int(s) for s in re.findall(r"^\s*keepalive_timeout (\d+)s;", text, re.MULTILINE)]


def keeps_idle_connection(port: int, seconds: float = 3) -> bool:
    """Whether the server on HOST:port answers a second request on a connection left idle that
    long (an idle server may close it only after nginx's keepalive_timeout)."""
    conn = http.client.HTTPConnection(HOST, port, timeout=10)
    try:
        conn.request("GET", "/healthz")
        assert conn.getresponse().read() and conn.sock is not None
        time.sleep(seconds)
        try:
            conn.request("GET", "/healthz")
            return conn.getresponse().status == 200
        except ConnectionError:  # http.client.RemoteDisconnected among them
            return False
    finally:
        conn.close()


def deploy_server_block(*, port: int, upstream: str, data_dir: Path) -> str:
    """docs/deploy.md's nginx configuration, listening on port, for the registry at upstream
    (HOST:PORT) whose REGISTRY_DATA_DIR is data_dir."""
    block = _doc_block("nginx")
    for placeholder in (DOC_LISTEN, DOC_UPSTREAM, DOC_DATA_DIR):
        assert placeholder in block, f"docs/deploy.md's nginx configuration lost its placeholder {placeholder!r}"
    return (
        block.replace(DOC_LISTEN, f"listen {HOST}:{port};")
        .replace(DOC_UPSTREAM, upstream)
        .replace(DOC_DATA_DIR, str(data_dir).rstrip("/"))
    )


# The placeholders of docs/deploy.md's nginx configuration for S3 (and of its bucket policy).
DOC_S3_ORIGIN = "http://127.0.0.1:9000/provisioning-extensions/packages/"
DOC_S3_UPSTREAMS = ("server 127.0.0.1:8000;", "server 127.0.0.1:8001;")
DOC_BUCKET = "provisioning-extensions"
DOC_PREFIX = "packages"
DOC_CACHE_DIR = "/var/cache/nginx/registry"


def deploy_s3_server_block(
    *, port: int, upstreams: list[str], s3_url: str, bucket: str, prefix: str, cache_dir: Path
) -> str:
    """docs/deploy.md's nginx configuration for S3, listening on port, balancing the web nodes at
    upstreams (HOST:PORT each), with the bucket at s3_url (path-style) as the static files' origin
    and what nginx keeps of them in cache_dir."""
    block = _doc_block("nginx", DOC_S3_ORIGIN)
    lines = block.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if DOC_S3_UPSTREAMS[0] in line)
    for offset, placeholder in enumerate(DOC_S3_UPSTREAMS):
        assert placeholder in lines[first + offset], f"docs/deploy.md's S3 upstream lost {placeholder!r}"
    indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
    servers = [f"{indent}server {upstream};\n" for upstream in upstreams]
    block = "".join(lines[:first] + servers + lines[first + len(DOC_S3_UPSTREAMS) :])
    for placeholder in (DOC_LISTEN, DOC_CACHE_DIR):
        assert placeholder in block, f"docs/deploy.md's S3 configuration lost its placeholder {placeholder!r}"
    origin = f"{s3_url.rstrip('/')}/{bucket}/{prefix.strip('/')}/"
    return (
        block.replace(DOC_LISTEN, f"listen {HOST}:{port};")
        .replace(DOC_S3_ORIGIN, origin)
        .replace(DOC_CACHE_DIR, str(cache_dir))
    )


def deploy_bucket_policy(*, bucket: str, prefix: str) -> str:
    """docs/deploy.md's bucket policy (public read of the index and the signed metadata) for bucket."""
    policy = _doc_block("json", "arn:aws:s3:::")
    assert f"{DOC_BUCKET}/{DOC_PREFIX}/" in policy, "docs/deploy.md's bucket policy lost its placeholders"
    return policy.replace(f"{DOC_BUCKET}/{DOC_PREFIX}/", f"{bucket}/{prefix.strip('/')}/")


def nginx_conf(directory: Path, *, servers: list[str], workers: int | str = 1, access_log: str = "off") -> str:
    """A whole nginx.conf running these server blocks (and other http-level directives), with its
    pid, logs and temporary files in directory (made here); ``access_log`` is the directive's
    argument: ``off``, or a path with the ``upstream`` format (which web node answered, status,
    time: what the benchmark counts per node)."""
    d = directory
    for sub in ("client", "proxy", "fastcgi", "uwsgi", "scgi"):
        (d / "tmp" / sub).mkdir(parents=True, exist_ok=True)
    mime = "include /etc/nginx/mime.types;" if Path("/etc/nginx/mime.types").exists() else ""
    return f"""
# As root (tests and benchmarks), the workers must read files under private temporary directories.
user root;
worker_processes {workers};
daemon off;
pid {d}/nginx.pid;
error_log {d / "error.log"} warn;
events {{ worker_connections 1024; }}
http {{
    {mime}
    default_type application/octet-stream;
    log_format upstream '$upstream_addr $status $request_time $request_uri';
    access_log {access_log};
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    client_body_temp_path {d}/tmp/client;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
{"".join(servers)}
}}
"""


class Nginx:
    """nginx with the given server blocks (and other http-level directives) on HOST."""

    def __init__(self, directory: Path, *, servers: list[str], workers: int | str = 1) -> None:
        binary = nginx_binary()
        if binary is None:
            raise RuntimeError("nginx is not installed (make services)")
        self.binary = binary
        self.directory = directory
        self.servers = servers
        self.workers = workers
        self.process: subprocess.Popen[bytes] | None = None
        self.config = directory / "nginx.conf"
        self.error_log = directory / "error.log"

    def _write_config(self) -> None:
        self.config.write_text(nginx_conf(self.directory, servers=self.servers, workers=self.workers), encoding="utf-8")

    def start(self, ports: list[int], timeout: float = 10) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._write_config()
        check = subprocess.run(
            [self.binary, "-t", "-p", str(self.directory), "-e", str(self.error_log), "-c", str(self.config)],
            capture_output=True,
            text=True,
        )
        if check.returncode != 0:
            raise RuntimeError(f"nginx refused its configuration:\n{check.stderr}\n{self.config.read_text()}")
        self.process = subprocess.Popen(
            [self.binary, "-p", str(self.directory), "-e", str(self.error_log), "-c", str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout
        for port in ports:
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"nginx exited with {self.process.returncode}: {self.log()}")
                try:
                    with socket.create_connection((HOST, port), timeout=0.2):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        self.stop()
                        raise RuntimeError(f"nginx did not listen on {port}: {self.log()}") from None
                    time.sleep(0.05)

    def log(self) -> str:
        return self.error_log.read_text(errors="replace")[-4000:] if self.error_log.exists() else ""

    def stop(self) -> None:
        if self.process is not None:
            stop_process_group(self.process)
        self.process = None
