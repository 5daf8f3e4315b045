"""The latency probe (cluster/probe.py) against a small server of the test's own: what it records,
and that a slow answer is counted against the requests it delayed (no coordinated omission)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cluster.probe import probe


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    slow_once = threading.Event()
    paths: list[str] = []

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes: without this, Nagle's algorithm holds the body
        # back until the client's delayed ACK (40 ms), which nginx and gunicorn do not do.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self.paths.append(self.path)
        if self.path.endswith("/slow") and not self.slow_once.is_set():
            self.slow_once.set()
            time.sleep(0.3)
        status = 404 if self.path.endswith("/missing") else 200
        body = b'{"data": {}}'
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.slow_once.clear()
    _Handler.paths = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_the_probe_reads_index_documents_on_a_fixed_schedule(server: str) -> None:
    samples = probe(server, seconds=0.5, interval=0.05, names=["etcd", "missing"], seed=1)
    assert 9 <= len(samples) <= 11
    assert [round(at, 2) for at, _, _ in samples] == [round(0.05 * i, 2) for i in range(len(samples))]
    assert {status for *_, status in samples} == {200, 404}
    assert set(_Handler.paths) == {"/api/v1/index/etcd", "/api/v1/index/missing"}


def test_a_slow_answer_counts_against_the_requests_it_held_up(server: str) -> None:
    samples = probe(server, seconds=0.6, interval=0.05, names=["slow"])
    latencies = [seconds for _, seconds, _ in samples]
    assert latencies[0] >= 0.3
    # The next requests were due while the first was being answered: each waited for it.
    assert latencies[1] >= 0.2 and latencies[2] >= 0.15
    assert latencies[-1] < 0.05


def test_a_server_that_is_gone_is_recorded_as_no_answer() -> None:
    samples = probe("http://127.0.0.1:9", seconds=0.2, interval=0.05, names=["etcd"])
    assert samples and all(status == 0 for *_, status in samples)
