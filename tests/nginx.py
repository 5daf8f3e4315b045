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
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.services import BASE_DIR, HOST, stop_process_group

DEPLOY_DOC = BASE_DIR / "docs" / "deploy.md"
# The placeholders of docs/deploy.md's nginx configuration.
DOC_LISTEN = "listen 80;"
DOC_UPSTREAM = "127.0.0.1:8000"
DOC_DATA_DIR = "/var/lib/registry"


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)


def deploy_server_block(*, port: int, upstream: str, data_dir: Path) -> str:
    """docs/deploy.md's nginx configuration, listening on port, for the registry at upstream
    (HOST:PORT) whose REGISTRY_DATA_DIR is data_dir."""
    text = DEPLOY_DOC.read_text(encoding="utf-8")
    match = re.search(r"```nginx\n(.*?)```", text, re.DOTALL)
    assert match, "docs/deploy.md has no ```nginx block"
    block = match.group(1)
    for placeholder in (DOC_LISTEN, DOC_UPSTREAM, DOC_DATA_DIR):
        assert placeholder in block, f"docs/deploy.md's nginx configuration lost its placeholder {placeholder!r}"
    return (
        block.replace(DOC_LISTEN, f"listen {HOST}:{port};")
        .replace(DOC_UPSTREAM, upstream)
        .replace(DOC_DATA_DIR, str(data_dir).rstrip("/"))
    )


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
        d = self.directory
        for sub in ("client", "proxy", "fastcgi", "uwsgi", "scgi"):
            (d / "tmp" / sub).mkdir(parents=True, exist_ok=True)
        mime = "include /etc/nginx/mime.types;" if Path("/etc/nginx/mime.types").exists() else ""
        self.config.write_text(
            f"""
# As root (tests and benchmarks), the workers must read files under private temporary directories.
user root;
worker_processes {self.workers};
daemon off;
pid {d}/nginx.pid;
error_log {self.error_log} warn;
events {{ worker_connections 1024; }}
http {{
    {mime}
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    client_body_temp_path {d}/tmp/client;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
{"".join(self.servers)}
}}
""",
            encoding="utf-8",
        )

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
