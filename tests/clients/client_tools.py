"""Helpers for the client's end-to-end tests: run the CLI in-process or as a real process, and a
small HTTP proxy in front of a live registry that misbehaves on downloads (cuts the connection
halfway through the body, or flips a byte and hides the checksum header)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

import pytest

from clients.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "extensions"


@dataclass
class Result:
    code: int
    out: str
    err: str
    notice: str = ""  # the once-only "trusting the registry ... on first use" line (SPEC 6.1), kept apart

    def json(self) -> Any:
        return json.loads(self.out)


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> Result:
    """The CLI in this process, as a user runs it."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return Result(code, captured.out, *split_first_use_notice(captured.err))


def split_first_use_notice(err: str) -> tuple[str, str]:
    """(stderr without the first-use notice, the notice): the notice is printed once per registry
    and home, before anything else a command says; tests of other behaviour read stderr without it."""
    lines = err.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if line.startswith("trusting the registry at ") and " on first use: root fingerprint " in line:
            return "".join(lines[:index] + lines[index + 1 :]), line.rstrip("\n")
    return err, ""


def start_cli(*argv: str | Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``python -m clients.cli ARGV`` as a separate process."""
    return subprocess.Popen(
        [sys.executable, "-m", "clients.cli", *[str(a) for a in argv]],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def leftovers(*roots: Path) -> list[Path]:
    """Temporary files and directories an install or download must never leave behind."""
    found: list[Path] = []
    for root in roots:
        if not root.exists():
            continue
        for pattern in ("**/*.part", "**/.extract-*", "**/.staging-*", "**/.remove-*", "**/*.tmp"):
            found.extend(root.glob(pattern))
    return sorted(found)


def files_under(root: Path) -> list[str]:
    """Every file (not directory) under root, relative, sorted; [] when root does not exist."""
    if not root.exists():
        return []
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink())


class ForwardingHandler(BaseHTTPRequestHandler):
    """A quiet HTTP/1.1 handler whose every method is ``_forward()`` (the test proxies' base)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return None

    def _forward(self) -> None:
        raise NotImplementedError

    def do_GET(self) -> None:
        self._forward()

    def do_HEAD(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        self._forward()

    def do_DELETE(self) -> None:
        self._forward()


class _Handler(ForwardingHandler):
    server: MisbehavingProxy

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        upstream = http.client.HTTPConnection(self.server.upstream_host, self.server.upstream_port, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        upstream.request(self.command, self.path, body=body, headers=headers)
        response = upstream.getresponse()
        data = response.read()
        upstream.close()
        download = "/download" in self.path and response.status == 200 and self.command == "GET"
        mode = self.server.mode if download else "pass"
        status = response.status
        if self.server.mode == "queued" and self.command == "POST" and status == 422:
            # A build that failed at once: a registry with a separate worker would have queued it.
            named = [d for d in json.loads(data)["error"]["details"] if isinstance(d, dict) and d.get("build")]
            if named:
                upstream = http.client.HTTPConnection(self.server.upstream_host, self.server.upstream_port, timeout=30)
                upstream.request("GET", f"/api/v1/builds/{named[0]['build']}/")
                data = upstream.getresponse().read()
                upstream.close()
                status = 202
        if self.server.mode == "queued" and self.command == "POST" and status == 202:
            # Answer as a registry with a separate worker would: the build is queued, only the upload
            # step logged; the client must then follow GET /api/v1/builds/{id}/.
            envelope = json.loads(data)
            envelope["data"].update(status="queued", log=envelope["data"]["log"][:1], result=None, error=None)
            data = json.dumps(envelope).encode()
            self.server.queued += 1
        self.send_response(status)
        for key, value in response.getheaders():
            if key.lower() in ("connection", "transfer-encoding", "content-length", "server", "date"):
                continue
            if mode == "corrupt" and key.lower() in ("x-checksum-sha256", "etag"):
                continue
            self.send_header(key, value)
        if mode == "gzip-label":
            # As an object store serving a .tar.gz with the metadata Content-Encoding: gzip, or a
            # proxy that labels it so: the bytes are the package's, unchanged.
            self.send_header("Content-Encoding", "gzip")
            self.server.labelled.append(self.headers.get("Accept-Encoding", ""))
        if mode != "endless":  # an endless body is delimited by the connection's end (never)
            self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if self.command == "HEAD":
            return
        if mode in ("endless", "drip", "stall"):
            self._misbehave(mode, data)
            return
        if mode == "cut":
            self.server.cuts += 1
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if mode == "corrupt":
            middle = len(data) // 2
            data = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
        self.wfile.write(data)

    def _misbehave(self, mode: str, data: bytes) -> None:
        """The package, then zeros without end (``endless``); 256 bytes every 0.25 s (``drip``);
        half of it, then nothing until the proxy stops (``stall``). ``sent`` counts the bytes."""
        server = self.server
        try:
            if mode == "endless":
                self.wfile.write(data)
                server.sent += len(data)
                while not server.stopping.is_set():
                    self.wfile.write(bytes(65536))
                    server.sent += 65536
            elif mode == "drip":
                for start in range(0, len(data), 256):
                    self.wfile.write(data[start : start + 256])
                    self.wfile.flush()
                    server.sent += len(data[start : start + 256])
                    if server.stopping.wait(0.25):
                        return
            else:
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                server.sent += len(data) // 2
                server.stopping.wait(60)
        except OSError:  # the client gave up
            pass


class ProxyServer(ThreadingHTTPServer):
    """A threaded HTTP server on a free loopback port in front of ``upstream``; a context manager
    that serves while inside it."""

    daemon_threads = True

    def __init__(self, upstream: str, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(5)


class MisbehavingProxy(ProxyServer):
    """Forwards every request to ``upstream``; downloads are cut halfway (``mode="cut"``), have
    one byte flipped with the checksum headers removed (``mode="corrupt"``) or are labelled
    ``Content-Encoding: gzip`` with their bytes unchanged (``mode="gzip-label"``; ``labelled`` keeps
    the Accept-Encoding of each), or sent without end, dripped or stalled halfway (``"endless"``,
    ``"drip"``, ``"stall"``: `_Handler._misbehave`); with ``mode="queued"`` a publish is answered as
    still queued."""

    def __init__(self, upstream: str, *, mode: str = "cut") -> None:
        super().__init__(upstream, _Handler)
        self.mode = mode
        self.cuts = 0
        self.sent = 0
        self.stopping = threading.Event()
        self.queued = 0
        self.labelled: list[str] = []

    def __exit__(self, *exc_info: object) -> None:
        self.stopping.set()
        super().__exit__(*exc_info)
