"""What a hostile registry (or something between it and the client) answers to the JSON API: the
client reads a bounded, decoded body within a deadline, and every malformed answer is a one-line
error, never a traceback, an exhausted memory or a wait without end."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from clients import registry_client, trust
from clients.errors import ClientError
from clients.registry_client import IntegrityError, RegistryClient, RegistryErrorAnswer
from tests.clients.client_tools import run

Capsys = pytest.CaptureFixture[str]
Answer = Callable[[BaseHTTPRequestHandler], None]


def _json(handler: BaseHTTPRequestHandler, body: bytes, *headers: tuple[str, str]) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    for name, value in headers:
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _endless(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()  # no length: the body ends when the connection does (never)
    block = b'{"success":true,"data":"' + b"a" * 65536
    try:
        while True:
            handler.wfile.write(block)
    except OSError:
        pass


def _drip(handler: BaseHTTPRequestHandler) -> None:
    body = b'{"success": true, "data": {"name": "etcd"}}'
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    try:
        for byte in body:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(0.5)
    except OSError:
        pass


def _endless_error(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(503)
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()
    try:
        while True:
            handler.wfile.write(b" " * 65536)
    except OSError:
        pass


def _huge(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/gzip")
    handler.send_header("Content-Length", str(10**12))  # then a byte now and then, in the attack
    handler.end_headers()
    handler.wfile.write(b"\x1f")


def _cut_short(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", "100000")
    handler.end_headers()
    handler.wfile.write(b'{"signed": {"_type": "root", ')  # and the connection closes


BOMB = gzip.compress(b'{"success":true,"data":"' + b" " * (64 * 1024 * 1024), 9)  # 64 MiB from about 64 KB
ANSWERS: dict[str, Answer] = {
    "gzip bomb": lambda h: _json(h, BOMB, ("Content-Encoding", "gzip")),
    "endless body": _endless,
    "bad gzip": lambda h: _json(h, b"not gzip at all", ("Content-Encoding", "gzip")),
    "nested too deeply": lambda h: _json(h, b'{"success":true,"data":' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
    "a number past int's digits": lambda h: _json(h, b'{"success":true,"data":{"name":' + b"9" * 100_000 + b"}}"),
    "data that is no extension": lambda h: _json(h, b'{"success":true,"data":["etcd"]}'),
    "drip": _drip,
    "an error without end": _endless_error,
    "a terabyte announced": _huge,
    # An envelope in a coding nobody asked for: whether it expands, and how far, is not known.
    "brotli": lambda h: _json(h, b'{"success":true,"data":{"name":"etcd"}}', ("Content-Encoding", "br")),
    "gzip, then brotli": lambda h: _json(h, gzip.compress(b"{}"), ("Content-Encoding", "gzip, br")),
    "cut short": _cut_short,
    "a header not in ASCII": lambda h: _json(h, b'{"success":true,"data":{"name":"etcd"}}', ("X-Note", "caf\u00e9")),
}


@pytest.fixture
def hostile() -> Iterator[Callable[[str], str]]:
    """Start a server answering every GET with ANSWERS[name]; gives its URL."""
    servers: list[ThreadingHTTPServer] = []

    def start(name: str) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                ANSWERS[name](self)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ("gzip bomb", "is larger than 32 MiB; nothing was used"),
        ("endless body", "is larger than 32 MiB; nothing was used"),
        ("bad gzip", "cannot be read"),
        ("nested too deeply", "without the JSON envelope"),
        ("a number past int's digits", "without the JSON envelope"),
        ("data that is no extension", "answered no extension"),
        ("an error without end", "is larger than 32 MiB; nothing was used"),
        ("brotli", "is encoded as br, which was not asked for (allowed: gzip, deflate)"),
        ("gzip, then brotli", "is encoded as br, which was not asked for (allowed: gzip, deflate)"),
    ],
)
def test_a_malformed_or_unbounded_answer_is_a_clear_error(
    hostile: Callable[[str], str], answer: str, said: str
) -> None:
    started = time.monotonic()
    with RegistryClient(hostile(answer), verify=False) as client, pytest.raises(RegistryErrorAnswer) as refused:
        client.lookup("taskserv", "etcd")
    assert said in refused.value.message and refused.value.code == "bad_response"
    assert time.monotonic() - started < 30


def test_only_the_codings_it_decodes_and_bounds_are_asked_for(
    hostile: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    # As httpx asks where brotli and zstandard are installed (here they are not).
    monkeypatch.setattr(httpx._client, "ACCEPT_ENCODING", "gzip, deflate, br, zstd")
    asked: list[str] = []
    with RegistryClient(hostile("brotli"), verify=False) as client:
        client._http.event_hooks["request"].append(lambda request: asked.append(request.headers["Accept-Encoding"]))
        with pytest.raises(RegistryErrorAnswer):
            client.lookup("taskserv", "etcd")
    assert asked == ["gzip, deflate"]


def test_a_download_refused_without_end_is_read_bounded(hostile: Callable[[str], str], tmp_path: Path) -> None:
    started = time.monotonic()
    client = RegistryClient(hostile("an error without end"), verify=False)
    with client, pytest.raises(RegistryErrorAnswer) as refused:
        client.download("etcd", "3.5.9", expected_sha256="0" * 64, target=tmp_path / "etcd.tar.gz")
    assert refused.value.message.startswith("downloading etcd 3.5.9: the answer from the registry at ")
    assert "is larger than 32 MiB; nothing was used" in refused.value.message
    assert refused.value.status == 503
    assert list(tmp_path.iterdir()) == []
    assert time.monotonic() - started < 30


def test_an_unsigned_download_announced_larger_than_any_package_is_refused_before_reading(
    hostile: Callable[[str], str], tmp_path: Path
) -> None:
    client = RegistryClient(hostile("a terabyte announced"), verify=False)
    with client, pytest.raises(IntegrityError) as refused:
        client.download("etcd", "3.5.9", expected_sha256="0" * 64, target=tmp_path / "etcd.tar.gz")
    assert refused.value.message.endswith(
        "is announced as 1000000000000 bytes, more than any package may be (268435456); nothing was downloaded"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_header_not_in_ascii_is_no_trouble(hostile: Callable[[str], str]) -> None:
    with RegistryClient(hostile("a header not in ASCII"), verify=False) as client:
        assert client.lookup("taskserv", "etcd") == {"name": "etcd"}


def test_an_answer_dripped_a_byte_at_a_time_is_given_up_at_the_deadline(
    hostile: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry_client, "ANSWER_SECONDS", 1.0)
    started = time.monotonic()
    with RegistryClient(hostile("drip"), verify=False) as client, pytest.raises(RegistryErrorAnswer) as refused:
        client.lookup("taskserv", "etcd")
    assert "is not whole after 1 s" in refused.value.message
    assert time.monotonic() - started < 5  # the deadline, not 0.5 s per byte of the body


def test_the_cli_says_it_in_one_line(capsys: Capsys, hostile: Callable[[str], str]) -> None:
    result = run(capsys, "--registry", hostile("bad gzip"), "--no-verify", "extension", "info", "etcd")
    assert result.code == 1
    [error] = [line for line in result.err.splitlines() if not line.startswith("warning: --no-verify")]
    assert error.startswith("error: GET api/v1/extensions/etcd") and "cannot be read" in error


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ("cut short", "peer closed connection without sending complete message body"),
        ("drip", "was not whole after 1 s (the most one signed metadata file may take)"),
        ("bad gzip", "was answered in the content coding gzip, which was not asked for (allowed: identity"),
    ],
)
def test_signed_metadata_cut_short_or_dripped_is_a_clear_error(
    hostile: Callable[[str], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str, said: str
) -> None:
    monkeypatch.setattr(trust, "ANSWER_SECONDS", 1.0)
    url, home = hostile(answer), tmp_path / "home"
    started = time.monotonic()
    with (
        RegistryClient(url, trust_home=home, cache_dir=home / "cache") as client,
        pytest.raises(ClientError) as refused,
    ):
        client.index("etcd")  # first use: the root is fetched to be pinned
    assert time.monotonic() - started < 10  # the deadline, not 0.5 s per byte of the file
    assert refused.value.message.startswith(
        f"cannot fetch the root metadata of {url}: GET {url}/tuf/metadata/1.root.json"
    )
    assert said in refused.value.message
    assert not list(home.rglob("*.json")), "nothing of the answer is kept"


def test_an_http_failure_the_library_has_no_words_for_is_one_line(
    capsys: Capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    def cut(*args: object, **kwargs: object) -> None:
        raise httpx.ReadError("connection reset by peer")

    monkeypatch.setattr(RegistryClient, "lookup", cut)
    result = run(capsys, "--home", tmp_path / "home", "taskserv", "create", "etcd", "--infra", tmp_path / "infra")
    assert result.code == 1
    assert result.err == "error: the exchange with the registry failed: connection reset by peer\n"
    assert not (tmp_path / "infra").exists()
