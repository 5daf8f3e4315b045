"""The OCI layer fast path (registry.fastpath.BlobFastPath) answers a whole GET of a package layer
exactly as the blob view does — status, every header, body, the download counted — sent as a
file, reading at most one row (none once cached); everything else is the view's answer."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import pytest
from django.core.wsgi import get_wsgi_application
from django.db import connection
from django.test.utils import CaptureQueriesContext

from registry import storage
from registry.fastpath import BlobFastPath
from registry.models import Version
from tests.wsgi_calls import Behind, assert_same, both, call

if TYPE_CHECKING:
    from tests.factories import Publisher

pytest_plugins = ["tests.factories"]

BLOB = "/v2/extensions/{name}/blobs/{digest}"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


@pytest.fixture
def apps() -> tuple[Any, BlobFastPath]:
    django_app = get_wsgi_application()
    return django_app, BlobFastPath(Behind(django_app))


@pytest.fixture
def digests(private_storage: Any, publisher: Publisher) -> dict[str, str]:
    """etcd 3.5.9's layer and config digests, from its OCI manifest."""
    import json

    publisher("etcd", "3.5.9")
    view_app = get_wsgi_application()
    reply = call(view_app, "/v2/extensions/etcd/manifests/3.5.9", HTTP_ACCEPT=MANIFEST_TYPE)
    assert reply.status == 200
    manifest = json.loads(reply.body)
    return {"layer": manifest["layers"][0]["digest"], "config": manifest["config"]["digest"]}


def test_a_layer_pull_is_the_views_answer_sent_as_a_file_and_counted(
    apps: tuple[Any, BlobFastPath], digests: dict[str, str]
) -> None:
    view, fast = both(apps, BLOB.format(name="etcd", digest=digests["layer"]))
    assert view.status == 200
    assert view.counted == 1
    assert_same(view, fast)
    assert not fast.passed_on
    assert fast.sent_as_file  # gunicorn's sendfile
    assert "sha256:" + hashlib.sha256(fast.body).hexdigest() == fast.headers["Docker-Content-Digest"]
    assert fast.headers["Content-Length"] == str(len(fast.body))


@pytest.mark.parametrize(
    ("what", "method", "headers", "status"),
    [
        pytest.param("layer", "HEAD", {}, 200, id="head"),
        pytest.param("layer", "GET", {"HTTP_RANGE": "bytes=0-9"}, 206, id="range"),
        pytest.param("layer", "GET", {"HTTP_RANGE": "bytes=5-"}, 206, id="range-from-the-middle"),
        pytest.param("layer", "GET", {"HTTP_IF_NONE_MATCH": "ETAG"}, 304, id="if-none-match"),
        pytest.param("config", "GET", {}, 200, id="config-blob"),
        pytest.param("unknown", "GET", {}, 404, id="unknown-digest"),
        pytest.param("layer", "POST", {}, 405, id="post"),
    ],
)
def test_everything_else_is_the_views_answer(
    apps: tuple[Any, BlobFastPath],
    digests: dict[str, str],
    what: str,
    method: str,
    headers: dict[str, str],
    status: int,
) -> None:
    digest = digests.get(what, "sha256:" + "0" * 64)
    headers = {k: v.replace("ETAG", f'"{digests["layer"]}"') for k, v in headers.items()}
    view, fast = both(apps, BLOB.format(name="etcd", digest=digest), method, **headers)
    assert view.status == status
    assert_same(view, fast)
    assert fast.passed_on


@pytest.mark.parametrize(
    "path",
    [
        BLOB.format(name="nothing-here", digest="sha256:" + "0" * 64),
        BLOB.format(name="Bad_Name", digest="sha256:" + "0" * 64),
        BLOB.format(name="etcd", digest="sha256:" + "A" * 64),
        BLOB.format(name="etcd", digest="sha512:" + "0" * 128),
        "/v2/extensions/etcd/blobs/sha256:" + "0" * 64 + "/extra",
    ],
)
def test_paths_it_does_not_serve_get_the_views_answer(
    apps: tuple[Any, BlobFastPath], digests: dict[str, str], path: str
) -> None:
    view, fast = both(apps, path)
    assert view.status in (400, 404)
    assert_same(view, fast)


def test_a_layer_missing_from_storage_is_the_views_answer(
    apps: tuple[Any, BlobFastPath], digests: dict[str, str]
) -> None:
    storage.delete(Version.objects.get(extension__name="etcd", version="3.5.9").storage_key)
    view, fast = both(apps, BLOB.format(name="etcd", digest=digests["layer"]))
    assert view.status >= 400
    assert_same(view, fast)
    assert fast.passed_on


@pytest.mark.parametrize("headers", [{}, {"HTTP_RANGE": "bytes=5-"}], ids=["whole", "range"])
def test_a_layer_file_of_another_size_is_never_sent_as_the_layer(
    apps: tuple[Any, BlobFastPath], digests: dict[str, str], headers: dict[str, str]
) -> None:
    row = Version.objects.get(extension__name="etcd", version="3.5.9")
    with open(storage.file_path(row.storage_key), "r+b") as handle:
        handle.truncate(row.size - 1)
    view, fast = both(apps, BLOB.format(name="etcd", digest=digests["layer"]), **headers)
    assert view.status == 503
    assert_same(view, fast)
    assert view.headers["Retry-After"]


def test_a_pull_reads_at_most_one_row_and_none_once_cached(
    apps: tuple[Any, BlobFastPath], digests: dict[str, str]
) -> None:
    _, fast_app = apps
    url = BLOB.format(name="etcd", digest=digests["layer"])
    with CaptureQueriesContext(connection) as first:
        assert call(fast_app, url).status == 200
    with CaptureQueriesContext(connection) as again:
        for _ in range(10):
            assert call(fast_app, url).status == 200
    assert len(first.captured_queries) == 1
    assert again.captured_queries == []


def test_with_object_storage_the_view_answers_its_presigned_redirect(
    apps: tuple[Any, BlobFastPath], publisher: Publisher, s3_storage: Any
) -> None:
    import json

    publisher("etcd", "3.5.9")
    reply = call(apps[0], "/v2/extensions/etcd/manifests/3.5.9", HTTP_ACCEPT=MANIFEST_TYPE)
    layer = json.loads(reply.body)["layers"][0]["digest"]
    view, fast = both(apps, BLOB.format(name="etcd", digest=layer))
    assert view.status == 307
    assert_same(view, fast)
