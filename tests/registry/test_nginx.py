"""docs/deploy.md's nginx configuration, run for real in front of a real registry (gunicorn,
REGISTRY_ACCEL_REDIRECT): nginx sends package files after the registry's X-Accel-Redirect with the
registry's headers, serves index documents from the static index with the API's bytes, and hands
everything else (unknown names, other methods, conditional requests) to the registry."""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import require
from tests.live_registry import LiveRegistry
from tests.nginx import (
    GUNICORN_KEEP_ALIVE,
    Nginx,
    deploy_server_block,
    doc_nginx_keepalive_timeouts,
    keeps_idle_connection,
    nginx_binary,
)
from tests.services import BASE_DIR, HOST, free_port

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("live")]

DOWNLOAD = "/api/v1/extensions/redis/versions/7.2.4/download"
IMMUTABLE = "public, max-age=31536000, immutable"


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveRegistry, str]]:
    """(the registry, the URL of nginx in front of it as docs/deploy.md configures it)."""
    require(nginx_binary() is not None, "nginx (Debian's nginx, `make services`)")
    root = tmp_path_factory.mktemp("deployed")
    registry = LiveRegistry(
        root / "registry", env={"REGISTRY_ACCEL_REDIRECT": "/_packages/", "REGISTRY_DOWNLOADS_FLUSH_SECONDS": "1"}
    )
    registry.start()
    registry.manage("publish", str(BASE_DIR / "extensions" / "taskservs" / "redis"))
    port = free_port()
    nginx = Nginx(
        root / "nginx",
        servers=[deploy_server_block(port=port, upstream=f"{HOST}:{registry.port}", data_dir=registry.data_dir)],
    )
    nginx.start([port])
    try:
        yield registry, f"http://{HOST}:{port}"
    finally:
        nginx.stop()
        registry.stop()


def by_registry(response: httpx.Response) -> bool:
    """Whether the registry answered (through nginx, which puts its own Server header on every
    answer): Django's security middleware sets Referrer-Policy on every answer of the registry's."""
    return "Referrer-Policy" in response.headers


def version_info(registry: LiveRegistry) -> dict[str, Any]:
    response = httpx.get(f"{registry.url}/api/v1/extensions/redis/versions/7.2.4/", timeout=10)
    return dict(response.json()["data"])


def test_nginx_sends_the_package_with_the_registrys_headers(deployed: tuple[LiveRegistry, str]) -> None:
    registry, url = deployed
    info = version_info(registry)
    response = httpx.get(url + DOWNLOAD, timeout=10)
    assert response.status_code == 200
    assert hashlib.sha256(response.content).hexdigest() == info["sha256"]
    assert len(response.content) == info["size"] == int(response.headers["Content-Length"])
    assert response.headers["ETag"] == f'"{info["sha256"]}"'
    assert response.headers["X-Checksum-Sha256"] == info["sha256"]
    assert response.headers["Content-Type"] == "application/gzip"
    assert response.headers["Content-Disposition"] == 'attachment; filename="redis-7.2.4.tar.gz"'
    assert response.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert "X-Accel-Redirect" not in response.headers
    # Asked directly, the registry only names the file: nginx must be in front.
    direct = httpx.get(registry.url + DOWNLOAD, timeout=10)
    assert (direct.status_code, direct.content) == (200, b"")
    assert direct.headers["X-Accel-Redirect"].startswith("/_packages/sha256/")


def test_the_registry_answers_head_304_and_errors_through_nginx(deployed: tuple[LiveRegistry, str]) -> None:
    registry, url = deployed
    sha = version_info(registry)["sha256"]
    head = httpx.head(url + DOWNLOAD, timeout=10)
    assert head.status_code == 200 and head.headers["Content-Length"] == str(version_info(registry)["size"])
    cached = httpx.get(url + DOWNLOAD, headers={"If-None-Match": f'"{sha}"'}, timeout=10)
    assert (cached.status_code, cached.content, cached.headers["ETag"]) == (304, b"", f'"{sha}"')
    missing = httpx.get(url + "/api/v1/extensions/redis/versions/9.9.9/download", timeout=10)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    # The internal location cannot be asked for from outside.
    assert httpx.get(url + "/_packages/index/redis", timeout=10).status_code == 404


def test_nginx_serves_the_static_index_with_the_apis_bytes(deployed: tuple[LiveRegistry, str]) -> None:
    registry, url = deployed
    api = httpx.get(f"{registry.url}/api/v1/index/redis", timeout=10)
    static = httpx.get(f"{url}/api/v1/index/redis", timeout=10)
    assert static.status_code == 200
    assert static.content == api.content
    assert static.headers["Content-Type"] == "application/json"
    assert static.headers["Cache-Control"] == "public, max-age=0, must-revalidate"
    assert not by_registry(static)  # nginx answered, not Python
    again = httpx.get(f"{url}/api/v1/index/redis", headers={"If-None-Match": static.headers["ETag"]}, timeout=10)
    assert again.status_code == 304
    unknown = httpx.get(f"{url}/api/v1/index/nothing-here", timeout=10)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
    post = httpx.post(f"{url}/api/v1/index/redis", timeout=10)
    assert post.status_code == 405 and post.json()["error"]["code"] == "method_not_allowed"


def test_nginx_serves_the_signed_metadata_and_index_targets_with_the_registrys_bytes(
    deployed: tuple[LiveRegistry, str],
) -> None:
    registry, url = deployed
    stored = registry.data_dir / "packages" / "tuf"
    metadata = sorted(p for p in (stored / "metadata").iterdir() if p.name != "timestamp.json")
    targets = sorted(p for p in (stored / "targets").rglob("*") if p.is_file())
    assert metadata and targets  # `trust init` and the publish wrote them
    for path in [*metadata, *targets]:
        served = "/" + path.relative_to(stored.parent).as_posix()
        static, direct = (httpx.get(base + served, timeout=10) for base in (url, registry.url))
        assert static.status_code == 200, served
        assert static.content == direct.content == path.read_bytes()
        assert static.headers["Cache-Control"] == direct.headers["Cache-Control"] == IMMUTABLE
        assert static.headers["Content-Type"] == direct.headers["Content-Type"], served
        assert not by_registry(static)  # nginx answered, not Python
    # timestamp.json is the registry's (it re-signs it when due); unknown names get its 404.
    timestamp = httpx.get(f"{url}/tuf/metadata/timestamp.json", timeout=10)
    assert timestamp.status_code == 200
    assert timestamp.headers["Cache-Control"] == "public, max-age=0, must-revalidate"
    assert by_registry(timestamp)
    assert timestamp.content == httpx.get(f"{registry.url}/tuf/metadata/timestamp.json", timeout=10).content
    package = "/tuf/targets/packages/redis/" + version_info(registry)["sha256"] + ".redis-7.2.4.tar.gz"
    through_nginx, asked_directly = (httpx.get(base + package, timeout=10) for base in (url, registry.url))
    assert (through_nginx.status_code, through_nginx.content) == (200, asked_directly.content)
    assert by_registry(through_nginx)  # the registry checks that the signed index lists it
    unknowns = ("/tuf/metadata/99.root.json", "/tuf/targets/index/" + "0" * 64 + ".nothing.json", "/tuf/metadata/")
    for unknown in unknowns:
        missing = httpx.get(url + unknown, timeout=10)
        assert (missing.status_code, by_registry(missing)) == (404, True), unknown


def test_downloads_through_nginx_are_counted(deployed: tuple[LiveRegistry, str]) -> None:
    registry, url = deployed
    time.sleep(2.5)  # the counts of the other tests' downloads are written (every second here)
    before = version_info(registry)["downloads"]
    for _ in range(3):
        assert httpx.get(url + DOWNLOAD, timeout=10).status_code == 200
    deadline = time.monotonic() + 20
    while version_info(registry)["downloads"] < before + 3 and time.monotonic() < deadline:
        time.sleep(0.2)  # the web processes write their counts every second here
    assert version_info(registry)["downloads"] == before + 3


def test_the_static_index_follows_a_publish(deployed: tuple[LiveRegistry, str], tmp_path: Path) -> None:
    registry, url = deployed
    from tests.factories import write_extension

    source = write_extension(tmp_path / "src", "nginx-probe", "1.0.0")
    registry.manage("publish", str(source))
    static = httpx.get(f"{url}/api/v1/index/nginx-probe", timeout=10)
    assert static.status_code == 200
    assert static.content == httpx.get(f"{registry.url}/api/v1/index/nginx-probe", timeout=10).content


def test_gunicorn_outlasts_nginx_on_idle_upstream_connections(deployed: tuple[LiveRegistry, str]) -> None:
    """nginx must close an idle upstream connection before gunicorn does: otherwise gunicorn
    closes one just as nginx sends the next request on it, and nginx answers a POST with 502 and
    takes the node out of rotation (what the cluster's load test once met)."""
    text = (BASE_DIR / "docs" / "deploy.md").read_text(encoding="utf-8")
    [command] = [line for line in text.splitlines() if line.startswith("gunicorn registry.wsgi")]
    assert re.search(rf"--keep-alive {GUNICORN_KEEP_ALIVE}\b", command), command
    assert "--no-control-socket" in command.split(), command  # its default path is one per machine
    nginx_timeouts = doc_nginx_keepalive_timeouts()
    assert len(nginx_timeouts) == text.count("upstream registry {") >= 2
    assert all(seconds < GUNICORN_KEEP_ALIVE for seconds in nginx_timeouts)

    # And the registry as the tests run it keeps an idle connection past gunicorn's default 2 s.
    registry, _ = deployed
    assert keeps_idle_connection(registry.port)
