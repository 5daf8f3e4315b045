"""docs/deploy.md's read nodes: the same application under granian, started with the page's own
command (tests.live_registry.granian_command), answers every request as gunicorn does on the same
data (index documents, downloads, OCI pulls, the API and its errors, headers included), takes a
publish, keeps an idle connection longer than nginx does, and writes its download counts at a
graceful stop."""

from __future__ import annotations

import hashlib
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from clients.authoring import build_extension
from extensions.oci import REPOSITORY_PREFIX
from tests.live_registry import LiveRegistry, doc_granian_line
from tests.nginx import doc_nginx_keepalive_timeouts, keeps_idle_connection
from tests.services import BASE_DIR

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("live")]

REDIS = BASE_DIR / "extensions" / "taskservs" / "redis"
INDEX = "/api/v1/index/redis"
DOWNLOAD = "/api/v1/extensions/redis/versions/7.2.4/download"
#: headers that name the server or the moment, not the answer
OWN_HEADERS = {"date", "server", "connection", "keep-alive"}


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveRegistry, LiveRegistry]]:
    """(gunicorn, granian) on one data directory and secret key, redis published. Download counts
    stay in each process's buffer (none is written while they run), so both show the same counts."""
    data = tmp_path_factory.mktemp("granian") / "registry"
    gunicorn = LiveRegistry(data, env={"REGISTRY_DOWNLOADS_FLUSH_SECONDS": "3600"})
    same = {"DJANGO_SECRET_KEY": gunicorn.env["DJANGO_SECRET_KEY"], "REGISTRY_DOWNLOADS_FLUSH_SECONDS": "3600"}
    granian = LiveRegistry(data, env=same, server="granian")
    try:
        gunicorn.start()
        gunicorn.manage("publish", str(REDIS))
        granian.start()
        yield gunicorn, granian
    finally:
        granian.stop()
        gunicorn.stop()


def _answer(registry: LiveRegistry, method: str, path: str, **kwargs: object) -> tuple[int, dict[str, str], bytes]:
    response = httpx.request(method, f"{registry.url}{path}", timeout=30, **kwargs)  # type: ignore[arg-type]
    own = registry.url.encode()  # links name the server the client asked
    headers = {
        k.lower(): v.replace(registry.url, "URL") for k, v in response.headers.items() if k.lower() not in OWN_HEADERS
    }
    if response.status_code == 304:
        headers.pop("content-length", None)  # framing: granian leaves it off a 304 (RFC 9110 allows both)
    return response.status_code, headers, response.content.replace(own, b"URL")


def test_granian_answers_every_read_and_error_as_gunicorn_does(servers: tuple[LiveRegistry, LiveRegistry]) -> None:
    gunicorn, granian = servers
    detail = httpx.get(f"{gunicorn.url}/api/v1/extensions/redis/versions/7.2.4/", timeout=30).json()["data"]
    index_etag = httpx.get(f"{gunicorn.url}{INDEX}", timeout=30).headers["etag"]
    blob = f"/v2/{REPOSITORY_PREFIX}redis/blobs/sha256:{detail['sha256']}"
    requests: list[tuple[str, str, dict[str, object]]] = [
        ("GET", INDEX, {}),
        ("HEAD", INDEX, {}),
        ("GET", INDEX, {"headers": {"If-None-Match": index_etag}}),
        ("GET", "/api/v1/index/no-such-extension", {}),
        ("GET", "/api/v1/index/Not_A_Name", {}),
        ("POST", INDEX, {}),
        ("GET", DOWNLOAD, {}),
        ("HEAD", DOWNLOAD, {}),
        ("GET", DOWNLOAD, {"headers": {"If-None-Match": f'"{detail["sha256"]}"'}}),
        ("GET", "/api/v1/extensions/redis/versions/9.9.9/download", {}),
        ("GET", "/api/v1/extensions/redis/versions/not-a-version/download", {}),
        ("GET", blob, {}),
        ("GET", blob, {"headers": {"Range": "bytes=0-99"}}),
        ("GET", f"/v2/{REPOSITORY_PREFIX}redis/manifests/7.2.4", {}),
        ("GET", f"/v2/{REPOSITORY_PREFIX}redis/manifests/9.9.9", {}),
        ("GET", "/tuf/metadata/timestamp.json", {}),
        ("GET", "/tuf/metadata/1.root.json", {}),
        ("GET", "/healthz", {}),
        ("GET", "/api/v1/extensions/redis/", {}),
        ("GET", "/api/v1/extensions/?q=redis", {}),
        ("POST", "/api/v1/resolve", {"json": {"requirements": ["redis"]}}),
        ("POST", "/api/v1/resolve", {"content": b"{not json", "headers": {"Content-Type": "application/json"}}),
        ("POST", "/api/v1/extensions/", {"files": {"file": ("x.tar.gz", b"not a package")}}),
    ]
    for method, path, kwargs in requests:
        ours = _answer(gunicorn, method, path, **kwargs)
        theirs = _answer(granian, method, path, **kwargs)
        assert theirs == ours, (method, path, kwargs)
    package = _answer(granian, "GET", DOWNLOAD)[2]
    assert hashlib.sha256(package).hexdigest() == detail["sha256"]


def test_a_chunked_body_is_taken_as_if_it_had_its_length_by_both_servers(
    servers: tuple[LiveRegistry, LiveRegistry], tmp_path: Path
) -> None:
    """Django reads a body only as far as Content-Length says: a chunked one (httpx sends an
    iterable's body that way) reached the views as empty ("requirements: This field is required")."""
    body = b'{"requirements": ["redis"]}'
    for registry in servers:
        sized = httpx.post(
            f"{registry.url}/api/v1/resolve", content=body, headers={"Content-Type": "application/json"}, timeout=30
        )
        chunked = httpx.post(
            f"{registry.url}/api/v1/resolve",
            content=[body[:10], body[10:]],  # an iterable: sent chunked, without a length
            headers={"Content-Type": "application/json"},
            timeout=30,
        )
        assert chunked.request.headers.get("Transfer-Encoding") == "chunked"
        assert (chunked.status_code, chunked.content) == (200, sized.content), registry.server
        # Read before anyone is authenticated, so not past what a JSON body may be (2 MiB).
        large = httpx.post(
            f"{registry.url}/api/v1/resolve",
            content=[b" " * 65536] * 40,
            headers={"Content-Type": "application/json"},
            timeout=30,
        )
        assert large.status_code == 411, (registry.server, large.text)
        assert large.json()["error"]["message"].startswith(
            "a request body without a Content-Length header may hold at most 2097152 bytes"
        )
        assert httpx.get(f"{registry.url}/healthz", timeout=30).status_code == 200  # and it goes on serving

    gunicorn, _ = servers
    token = gunicorn.createtoken("chunky")
    # An extension of its own (etcd is another test's to publish), as docs/client.md makes my-etcd.
    source = tmp_path / "chunky-etcd"
    shutil.copytree(BASE_DIR / "extensions" / "taskservs" / "etcd" / "3.5.9", source)
    manifest = source / "extension.toml"
    manifest.write_text(manifest.read_text().replace('"etcd"', '"chunky-etcd"'))
    built = build_extension(source, tmp_path / "dist")
    upload = httpx.Request(
        "POST", f"{gunicorn.url}/api/v1/extensions/", files={"file": (built.path.name, built.path.read_bytes())}
    )
    framed = upload.read()
    published = httpx.post(
        upload.url,
        content=[framed[i : i + 65536] for i in range(0, len(framed), 65536)],
        headers={"Content-Type": upload.headers["Content-Type"], "Authorization": f"Bearer {token}"},
        timeout=60,
    )
    assert published.status_code == 202, published.text
    assert published.json()["data"]["upload"] == {
        "size": built.path.stat().st_size,
        "sha256": hashlib.sha256(built.path.read_bytes()).hexdigest(),
    }


def test_granian_takes_a_publish_through_the_api(servers: tuple[LiveRegistry, LiveRegistry], tmp_path: Path) -> None:
    gunicorn, granian = servers
    token = granian.createtoken("alice")
    built = build_extension(BASE_DIR / "extensions" / "taskservs" / "etcd" / "3.5.12", tmp_path)
    answer = httpx.post(
        f"{granian.url}/api/v1/extensions/",
        files={"file": (built.path.name, built.path.read_bytes(), "application/gzip")},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    assert answer.status_code == 202, answer.text
    deadline = time.monotonic() + 120
    state, build = "", {}
    while time.monotonic() < deadline:
        build = httpx.get(answer.json()["data"]["url"], timeout=30).json()["data"]
        state = build["status"]
        if state in ("succeeded", "failed"):
            break
        time.sleep(0.5)
    assert state == "succeeded", build
    listed = httpx.get(f"{gunicorn.url}/api/v1/index/{built.name}", timeout=30)
    assert listed.status_code == 200 and built.version in listed.text


def test_granian_keeps_an_idle_connection_longer_than_nginx(servers: tuple[LiveRegistry, LiveRegistry]) -> None:
    """docs/deploy.md: granian closes an idle connection after --http1-header-read-timeout, which
    must be longer than nginx's keepalive_timeout for its upstreams (else nginx can send a request on
    a connection just as granian closes it, and answers a POST with 502)."""
    command = doc_granian_line()
    match = re.search(r"--http1-header-read-timeout (\d+)\b", command)
    assert match, command
    nginx_timeouts = doc_nginx_keepalive_timeouts()
    assert nginx_timeouts and all(seconds * 1000 < int(match[1]) for seconds in nginx_timeouts)

    _, granian = servers
    assert keeps_idle_connection(granian.port)


def test_a_graceful_stop_of_granian_writes_its_download_counts(tmp_path: Path) -> None:
    registry = LiveRegistry(tmp_path / "registry", env={"REGISTRY_DOWNLOADS_FLUSH_SECONDS": "3600"}, server="granian")
    registry.start(workers=2, threads=2)
    try:
        registry.manage("publish", str(REDIS))
        with httpx.Client(base_url=registry.url, timeout=10) as client:
            for _ in range(9):
                assert client.get(DOWNLOAD).status_code == 200
        assert httpx.get(f"{registry.url}/api/v1/extensions/redis/", timeout=10).json()["data"]["downloads"] == 0
        registry.stop()  # SIGTERM: each worker writes its buffer as it exits
        registry.start(workers=2, threads=2)
        assert httpx.get(f"{registry.url}/api/v1/extensions/redis/", timeout=10).json()["data"]["downloads"] == 9
    finally:
        registry.stop()
