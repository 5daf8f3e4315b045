"""An HTTP proxy between the client and a live registry that an attacker controls: it records every
answer (per path), can replay recorded answers, and rewrites answers with rules the test gives.

    with TamperingProxy(registry.url) as proxy:
        proxy.rewrite = lambda ex: ex.replace_body(b"old", b"new") if ex.path.endswith(".json") else ex
        then = proxy.recording()             # what the proxy has seen so far, per path
        proxy.replay = {path: then[path]}    # answer these paths from the recording
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from tests.clients.client_tools import ForwardingHandler, ProxyServer

_HOP = ("connection", "transfer-encoding", "content-length", "server", "date", "keep-alive")


@dataclass(frozen=True)
class Exchange:
    method: str
    path: str
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def with_body(self, body: bytes) -> Exchange:
        return replace(self, body=body)

    def replace_body(self, old: bytes, new: bytes) -> Exchange:
        return replace(self, body=self.body.replace(old, new))

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


@dataclass
class _Log:
    paths: list[str] = field(default_factory=list)


class _Handler(ForwardingHandler):
    server: TamperingProxy

    def _forward(self) -> None:
        proxy = self.server
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        path = proxy.route(self.path) if proxy.route is not None else self.path
        with proxy.lock:
            proxy.log.paths.append(self.path)
            replayed = proxy.replay.get(self.path)
        if replayed is not None:
            exchange = replayed
        else:
            upstream = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            upstream.request(self.command, path, body=body, headers=headers)
            response = upstream.getresponse()
            exchange = Exchange(self.command, self.path, response.status, tuple(response.getheaders()), response.read())
            upstream.close()
            with proxy.lock:
                if self.command == "GET" and exchange.status == 200:
                    proxy.recorded[self.path] = exchange
        if proxy.rewrite is not None:
            exchange = proxy.rewrite(exchange)
        self.send_response(exchange.status)
        for key, value in exchange.headers:
            if key.lower() not in _HOP:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(exchange.body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if self.command != "HEAD":
            self.wfile.write(exchange.body)


class TamperingProxy(ProxyServer):
    def __init__(self, upstream: str) -> None:
        super().__init__(upstream, _Handler)
        self.lock = threading.Lock()
        self.recorded: dict[str, Exchange] = {}
        self.replay: dict[str, Exchange] = {}
        self.rewrite: Callable[[Exchange], Exchange] | None = None
        self.route: Callable[[str], str] | None = None  # the upstream path asked for a request's path
        self.log = _Log()

    def recording(self) -> dict[str, Exchange]:
        with self.lock:
            return dict(self.recorded)
