"""`provisioning runtime serve`: the loaded/reload API on loopback, as a separate process, sharing
the runtime state with the CLI."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.clients.client_tools import ROOT, run

if TYPE_CHECKING:
    from tests.live_registry import LiveRegistry


@dataclass
class Served:
    process: subprocess.Popen[str]
    port: int
    home: Path
    registry: str

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], Any]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            raw = response.read()
            return response.status, dict(response.getheaders()), json.loads(raw) if raw else None
        finally:
            connection.close()

    def reload(self, payload: Any) -> tuple[int, dict[str, str], Any]:
        return self.request(
            "POST",
            "/api/v1/extensions/reload",
            json.dumps(payload).encode(),
            {"Content-Type": "application/json"},
        )


def serve(registry: str, home: Path, *options: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``provisioning runtime serve --port 0`` as a separate process."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PROVISIONING_EXTENSION", "PROVISIONING_ALLOWED", "PROVISIONING_BLOCKED"))
    }
    argv = ["--registry", registry, "--home", str(home), "runtime", "serve", "--port", "0", *options]
    return subprocess.Popen(
        [sys.executable, "-m", "clients.cli", *argv],
        cwd=ROOT,
        env={**base, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def announced_port(process: subprocess.Popen[str]) -> int:
    assert process.stdout is not None
    line = process.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    assert found, f"no URL in {line!r}; stderr: {process.stderr.read() if process.stderr and not line else ''}"
    return int(found.group(1))


@pytest.fixture
def served(examples_registry: LiveRegistry, tmp_path: Path) -> Iterator[Served]:
    home = tmp_path / "home"
    process = serve(examples_registry.url, home)
    try:
        yield Served(process, announced_port(process), home, examples_registry.url)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(10)


def error_of(status: int, body: Any, expected_status: int, code: str) -> dict[str, Any]:
    assert status == expected_status, body
    assert body["success"] is False and set(body) == {"success", "error"}
    assert body["error"]["code"] == code
    assert set(body["error"]) == {"code", "message", "details"}
    return dict(body["error"])


def test_loaded_lists_what_the_cli_loaded_and_reload_reads_it_again(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    status, headers, body = served.request("GET", "/api/v1/extensions/loaded")
    assert (status, body) == (200, {"success": True, "data": []})
    assert headers["Content-Type"] == "application/json"

    loaded = run(capsys, "--registry", served.registry, "--home", served.home, "module", "load", "taskserv", "etcd")
    assert loaded.code == 0, loaded.err
    status, _, body = served.request("GET", "/api/v1/extensions/loaded")
    assert status == 200 and body["success"] is True
    [item] = body["data"]
    assert set(item) == {"metadata", "path", "loaded_at", "source"}
    assert set(item["metadata"]) == {
        "name",
        "version",
        "description",
        "extension_type",
        "dependencies",
        "author",
        "repository",
    }
    assert (item["metadata"]["name"], item["metadata"]["version"]) == ("etcd", "3.5.12")

    status, _, body = served.reload({"extension_type": "taskserv", "name": "etcd"})
    assert (status, body) == (200, {"success": True, "data": "Extension etcd reloaded"})
    status, _, after = served.request("GET", "/api/v1/extensions/loaded")
    assert after["data"][0]["loaded_at"] > item["loaded_at"]

    listed = run(capsys, "--home", served.home, "module", "list", "--output", "json")
    assert json.loads(listed.out)["data"][0]["loaded_at"] == after["data"][0]["loaded_at"]

    # The platform's capitalised type is accepted too.
    status, _, body = served.reload({"extension_type": "Taskserv", "name": "etcd"})
    assert status == 200


def test_bad_requests_get_the_error_envelope(served: Served) -> None:
    error = error_of(
        *served.request("POST", "/api/v1/extensions/reload", b"{not json", {"Content-Type": "application/json"})[::2],
        400,
        "bad_request",
    )
    assert error["details"] == [{"path": "body"}]

    error = error_of(*served.reload({"extension_type": "taskserv"})[::2], 400, "bad_request")
    assert [d["path"] for d in error["details"]] == ["name"]
    error = error_of(*served.reload({"extension_type": 3, "name": ""})[::2], 400, "bad_request")
    assert [d["path"] for d in error["details"]] == ["extension_type", "name"]
    error_of(*served.reload(["taskserv", "etcd"])[::2], 400, "bad_request")
    error = error_of(*served.reload({"extension_type": "widget", "name": "etcd"})[::2], 400, "bad_request")
    assert "use one of provider, taskserv, cluster, template" in error["message"]
    error_of(*served.reload({"extension_type": "taskserv", "name": "Not A Name"})[::2], 400, "bad_request")

    error = error_of(*served.reload({"extension_type": "taskserv", "name": "redis"})[::2], 404, "not_found")
    assert error["details"][0]["reason"] == "not_loaded"

    status, _, body = served.request("POST", "/api/v1/extensions/reload", b"{}", {"Content-Type": "text/plain"})
    error_of(status, body, 415, "unsupported_media_type")  # the registry's code (docs/api.md)
    status, _, body = served.request(
        "POST", "/api/v1/extensions/reload", b"x" * 70_000, {"Content-Type": "application/json"}
    )
    error_of(status, body, 413, "bad_request")

    status, _, body = served.request("GET", "/api/v1/extensions/nope")
    error_of(status, body, 404, "not_found")
    status, headers, body = served.request("GET", "/api/v1/extensions/reload")
    error_of(status, body, 405, "method_not_allowed")
    assert headers["Allow"] == "POST"
    status, headers, body = served.request("DELETE", "/api/v1/extensions/loaded")
    error_of(status, body, 405, "method_not_allowed")
    assert headers["Allow"] == "GET"

    status, _, body = served.request("GET", "/api/v1/extensions/loaded", headers={"Host": "attacker.example:80"})
    error_of(status, body, 403, "forbidden")
    status, _, body = served.request("GET", "/api/v1/extensions/loaded", headers={"Host": f"localhost:{served.port}"})
    assert status == 200


def test_a_body_nested_too_deeply_or_holding_a_huge_number_is_a_400_not_a_crash(served: Served) -> None:
    json_type = {"Content-Type": "application/json"}
    reload = "/api/v1/extensions/reload"
    hint = 'send {"extension_type": "taskserv", "name": "NAME"}'
    deep = b"[" * 30_000 + b"]" * 30_000  # within the 64 KiB cap
    error = error_of(*served.request("POST", reload, deep, json_type)[::2], 400, "bad_request")
    assert error == {
        "code": "bad_request",
        "message": f"the body is not JSON the runtime can read (it is nested too deeply): {hint}",
        "details": [{"path": "body"}],
    }
    deep_field = b'{"extension_type": "taskserv", "name": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"
    error = error_of(*served.request("POST", reload, deep_field, json_type)[::2], 400, "bad_request")
    assert error["message"] == f"the body is not JSON the runtime can read (it is nested too deeply): {hint}"
    huge = b'{"extension_type": "taskserv", "name": ' + b"1" * 5_000 + b"}"
    error = error_of(*served.request("POST", reload, huge, json_type)[::2], 400, "bad_request")
    assert error["message"] == (
        f"the body is not JSON the runtime can read (it holds a number thousands of digits long): {hint}"
    )
    # Deeper still is over the body cap, refused before it is read.
    error = error_of(*served.request("POST", reload, b"[" * 100_000, json_type)[::2], 413, "bad_request")
    assert error["message"] == "the body is 100000 bytes: at most 65536 are allowed"
    # The runtime goes on answering.
    status, _, body = served.request("GET", "/api/v1/extensions/loaded")
    assert (status, body) == (200, {"success": True, "data": []})


def test_reload_of_two_loaded_versions_reloads_both_or_the_one_named(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--registry", served.registry, "--home", served.home, "module", "load", "taskserv", "etcd"]
    for version in ("3.5.9", "3.5.12"):
        assert run(capsys, *base, "--version", version).code == 0
    status, _, before = served.request("GET", "/api/v1/extensions/loaded")
    stamps = {i["metadata"]["version"]: i["loaded_at"] for i in before["data"]}
    assert set(stamps) == {"3.5.9", "3.5.12"}

    status, _, body = served.reload({"extension_type": "taskserv", "name": "etcd"})
    assert (status, body) == (200, {"success": True, "data": "Extension etcd reloaded (3.5.9, 3.5.12)"})
    _, _, both = served.request("GET", "/api/v1/extensions/loaded")
    after = {i["metadata"]["version"]: i["loaded_at"] for i in both["data"]}
    assert all(after[v] > stamps[v] for v in stamps)

    status, _, body = served.reload({"extension_type": "taskserv", "name": "etcd", "version": "3.5.9"})
    assert (status, body) == (200, {"success": True, "data": "Extension etcd reloaded"})
    _, _, one = served.request("GET", "/api/v1/extensions/loaded")
    now = {i["metadata"]["version"]: i["loaded_at"] for i in one["data"]}
    assert now["3.5.9"] > after["3.5.9"] and now["3.5.12"] == after["3.5.12"]

    error = error_of(*served.reload({"extension_type": "taskserv", "name": "etcd", "version": "3.5.1"})[::2], 404,
                     "not_found")  # fmt: skip
    assert "loaded versions: 3.5.9, 3.5.12" in error["message"]
    error_of(*served.reload({"extension_type": "taskserv", "name": "etcd", "version": 3})[::2], 400, "bad_request")
    error_of(*served.reload({"extension_type": "taskserv", "name": "etcd", "version": "^3"})[::2], 400, "bad_request")


def test_a_reload_the_policy_refuses_is_forbidden(
    examples_registry: LiveRegistry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    assert (
        run(capsys, "--registry", examples_registry.url, "--home", home, "module", "load", "taskserv", "redis").code
        == 0
    )
    process = serve(examples_registry.url, home, env={"PROVISIONING_BLOCKED_EXTENSIONS": "redis"})
    try:
        served = Served(process, announced_port(process), home, examples_registry.url)
        error = error_of(*served.reload({"extension_type": "taskserv", "name": "redis"})[::2], 403, "forbidden")
        assert error["details"][0]["reason"] == "blocked"
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(10)


def _listening_addresses(port: int) -> list[str]:
    """Local addresses with a listening TCP socket on ``port`` (Linux /proc/net/tcp and tcp6)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, port_hex = fields[1].rsplit(":", 1)
            if int(port_hex, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                found.append(address)
    return found


def _other_addresses() -> list[str]:
    """This machine's non-loopback IPv4 addresses: the host name's, and the source address the
    kernel would route from (a UDP "connect" sends nothing)."""
    addresses = set()
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            addresses.add(str(info[4][0]))
    except OSError:
        pass
    for target in ("10.255.255.255", "192.0.2.255", "8.8.8.8"):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                probe.connect((target, 9))
                addresses.add(str(probe.getsockname()[0]))
            except OSError:
                continue
    return sorted(a for a in addresses if not a.startswith(("127.", "0.")))


def test_it_listens_on_loopback_only_and_stops_on_sigterm(served: Served) -> None:
    if Path("/proc/net/tcp").exists():
        assert _listening_addresses(served.port) == ["0100007F"]  # 127.0.0.1, and nothing else
    for address in _other_addresses():
        with pytest.raises(OSError), socket.create_connection((address, served.port), timeout=2):
            pass
    with socket.create_connection(("127.0.0.1", served.port), timeout=2):
        pass
    served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(10) == 0
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", served.port), timeout=1).close()
        except OSError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the port still accepts connections after SIGTERM")


def test_serve_with_output_json_announces_itself_with_the_envelope(
    examples_registry: LiveRegistry, tmp_path: Path
) -> None:
    process = serve(examples_registry.url, tmp_path / "home", "--output", "json")
    try:
        assert process.stdout is not None
        lines = []
        while not (lines and lines[-1] == "}\n"):
            line = process.stdout.readline()
            assert line, process.stderr.read() if process.stderr else ""
            lines.append(line)
        body = json.loads("".join(lines))
        assert body["success"] is True
        assert body["data"]["url"] == f"http://127.0.0.1:{body['data']['port']}"
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0


def test_one_kept_alive_connection_serves_requests_after_a_refused_one(tmp_path: Path) -> None:
    import threading

    from clients.runtime import ExtensionManager, LoadPolicy
    from clients.runtime_api import make_server

    exts = tmp_path / "exts"
    root = exts / "taskservs" / "aa" / "1.0.0"
    root.mkdir(parents=True)
    (root / "extension.toml").write_text(
        '[extension]\nname = "aa"\nversion = "1.0.0"\ndescription = "a"\ntype = "taskserv"\n'
    )
    manager = ExtensionManager(
        home=tmp_path / "home", client=None, runtime_version=None, search_paths=[exts], policy=LoadPolicy()
    )
    manager.load_extension("taskserv", "aa")
    server = make_server(manager, port=0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        assert server.server_address[0] == "127.0.0.1"
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        answers = []
        for method, path, body, content_type in [
            ("POST", "/api/v1/extensions/reload", b'{"name": 1}', "application/json"),
            ("GET", "/api/v1/extensions/reload", None, None),
            ("POST", "/api/v1/extensions/reload", b'{"extension_type": "taskserv", "name": "aa"}', "text/plain"),
            ("POST", "/api/v1/extensions/reload", b'{"extension_type": "taskserv", "name": "aa"}', "application/json"),
            ("GET", "/api/v1/extensions/loaded", None, None),
        ]:
            headers = {"Content-Type": content_type} if content_type else {}
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            answers.append((response.status, json.loads(response.read())["success"]))
        connection.close()
        assert answers == [(400, False), (405, False), (415, False), (200, True), (200, True)]
    finally:
        server.shutdown()
        server.server_close()
