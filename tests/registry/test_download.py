"""GET/HEAD /api/v1/extensions/{name}/versions/{version}/download: the package bytes, its checksum
headers, conditional requests, yanked versions, download counts, and the object-storage redirect."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import pytest
from django.http import FileResponse
from django.test import Client

from registry import downloadcounts, services, storage
from registry.tokens import Actor

if TYPE_CHECKING:
    from tests.factories import Publisher

pytest_plugins = ["tests.factories"]  # the user, token and publisher fixtures

URL = "/api/v1/extensions/{name}/versions/{version}/download"


def body_of(response: Any) -> bytes:
    assert isinstance(response, FileResponse)  # streamed from storage, never read whole
    return b"".join(response.streaming_content)


def downloads(client: Client, name: str) -> tuple[int, list[int]]:
    """The counts the API shows once what was counted is written (registry.downloadcounts)."""
    downloadcounts.flush()
    data = client.get(f"/api/v1/extensions/{name}/").json()["data"]
    return data["downloads"], [v["downloads"] for v in data["versions"]]


def test_it_streams_the_package_with_its_checksum_headers(client: Client, publisher: Publisher) -> None:
    path = publisher.package("etcd", "3.5.9")
    from tests.factories import publish

    assert publish(client, publisher.token, path).status_code == 202
    response = client.get(URL.format(name="etcd", version="3.5.9"))
    assert response.status_code == 200
    content = body_of(response)
    assert content == path.read_bytes()
    sha = hashlib.sha256(content).hexdigest()
    assert response["ETag"] == f'"{sha}"'
    assert response["X-Checksum-Sha256"] == sha
    assert response["Content-Type"] == "application/gzip"
    assert response["Content-Disposition"] == 'attachment; filename="etcd-3.5.9.tar.gz"'
    assert response["Content-Length"] == str(len(content))
    version = client.get("/api/v1/extensions/etcd/versions/3.5.9/").json()["data"]
    assert version["sha256"] == sha
    assert version["size"] == len(content)


def test_each_download_is_counted_on_the_version_and_the_extension(client: Client, publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    publisher("etcd", "3.5.12")
    for version in ("3.5.9", "3.5.12", "3.5.12"):
        body_of(client.get(URL.format(name="etcd", version=version)))
    assert downloads(client, "etcd") == (3, [2, 1])


def test_if_none_match_with_the_etag_is_a_304_that_is_not_counted(client: Client, publisher: Publisher) -> None:
    build = publisher("etcd", "3.5.9")
    sha = build["upload"]["sha256"]
    url = URL.format(name="etcd", version="3.5.9")
    for header in (f'"{sha}"', f'W/"{sha}"', f'"other", "{sha}"', "*"):
        response = client.get(url, HTTP_IF_NONE_MATCH=header)
        assert response.status_code == 304, header
        assert response.content == b""
        assert response["ETag"] == f'"{sha}"'
        assert response["X-Checksum-Sha256"] == sha
    assert downloads(client, "etcd") == (0, [0])
    stale = client.get(url, HTTP_IF_NONE_MATCH='"0000"')
    assert stale.status_code == 200
    assert hashlib.sha256(body_of(stale)).hexdigest() == sha
    assert downloads(client, "etcd") == (1, [1])


def test_head_answers_the_headers_without_the_body_and_is_not_counted(client: Client, publisher: Publisher) -> None:
    build = publisher("etcd", "3.5.9")
    response = client.head(URL.format(name="etcd", version="3.5.9"))
    assert response.status_code == 200
    assert response.content == b""
    assert response["ETag"] == f'"{build["upload"]["sha256"]}"'
    assert response["X-Checksum-Sha256"] == build["upload"]["sha256"]
    assert response["Content-Length"] == str(build["upload"]["size"])
    assert response["Content-Type"] == "application/gzip"
    assert response["Content-Disposition"] == 'attachment; filename="etcd-3.5.9.tar.gz"'
    assert downloads(client, "etcd") == (0, [0])


def test_a_yanked_version_stays_downloadable(client: Client, publisher: Publisher, user: Any) -> None:
    build = publisher("etcd", "3.5.9")
    services.version_yank(actor=Actor(user=user), name="etcd", version="3.5.9", reason="broken")
    response = client.get(URL.format(name="etcd", version="3.5.9"))
    assert response.status_code == 200
    assert hashlib.sha256(body_of(response)).hexdigest() == build["upload"]["sha256"]
    assert downloads(client, "etcd") == (1, [1])


def test_build_metadata_in_the_url_downloads_the_same_package(client: Client, publisher: Publisher) -> None:
    build = publisher("etcd", "1.0.0+build.7")
    for spelling in ("1.0.0", "1.0.0+build.7", "1.0.0+zzz"):
        response = client.get(URL.format(name="etcd", version=spelling))
        assert response.status_code == 200
        assert response["X-Checksum-Sha256"] == build["upload"]["sha256"]
        assert response["Content-Disposition"] == 'attachment; filename="etcd-1.0.0+build.7.tar.gz"'
        body_of(response)


def test_any_accept_header_gets_the_package(client: Client, publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    for accept in ("application/gzip", "application/octet-stream", "text/html", "*/*"):
        response = client.get(URL.format(name="etcd", version="3.5.9"), HTTP_ACCEPT=accept)
        assert response.status_code == 200, accept
        body_of(response)


def test_errors_are_the_json_envelope_whatever_the_accept_header(client: Client, publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    missing = client.get(URL.format(name="etcd", version="9.9.9"), HTTP_ACCEPT="application/gzip")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    bad = client.get(URL.format(name="etcd", version="9.9"))
    assert bad.status_code == 400
    assert "SemVer 2.0.0" in bad.json()["error"]["message"]
    assert client.get(URL.format(name="nothing", version="1.0.0")).status_code == 404


def test_with_object_storage_it_redirects_to_a_presigned_url(
    client: Client, publisher: Publisher, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real S3 round trip (moto's server) is tested with the storage tests; here only the view's
    # S3 branch: a 302 carrying the checksum headers, counted, never cached.
    build = publisher("etcd", "3.5.9")
    sha = build["upload"]["sha256"]
    calls: list[tuple[str, str]] = []

    def presigned_url(key: str, *, filename: str) -> str:
        calls.append((key, filename))
        return f"https://objects.example/{key}?X-Amz-Signature=abc"

    settings.REGISTRY_STORAGE = "s3"
    monkeypatch.setattr(storage, "presigned_url", presigned_url)
    response = client.get(URL.format(name="etcd", version="3.5.9"))
    assert response.status_code == 302
    assert response["Location"] == f"https://objects.example/{storage.package_key(sha)}?X-Amz-Signature=abc"
    assert calls == [(storage.package_key(sha), "etcd-3.5.9.tar.gz")]
    assert response["ETag"] == f'"{sha}"'
    assert response["X-Checksum-Sha256"] == sha
    assert response["Cache-Control"] == "private, no-store"
    assert downloads(client, "etcd") == (1, [1])
    assert client.get(URL.format(name="etcd", version="3.5.9"), HTTP_IF_NONE_MATCH=f'"{sha}"').status_code == 304


@pytest.mark.s3
def test_with_s3_the_presigned_redirect_serves_the_same_bytes(
    client: Client, publisher: Publisher, s3_storage: Any
) -> None:
    import urllib.request

    path = publisher.package("etcd", "3.5.9")
    from tests.factories import publish

    assert publish(client, publisher.token, path).status_code == 202
    response = client.get(URL.format(name="etcd", version="3.5.9"))
    assert response.status_code == 302
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert response["X-Checksum-Sha256"] == sha
    with urllib.request.urlopen(response["Location"], timeout=10) as fetched:
        content = fetched.read()
        disposition = fetched.headers["Content-Disposition"]
    assert content == path.read_bytes()
    assert disposition == 'attachment; filename="etcd-3.5.9.tar.gz"'
