"""The download fast path (registry.fastpath.DownloadFastPath) and the Django view answer every
download request identically — status, every header, body, whether it counts — and neither
writes to the database: the fast path reads at most one row (none once name@version is cached)."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

import pytest
from django.core.wsgi import get_wsgi_application
from django.db import connection
from django.test.utils import CaptureQueriesContext

from registry import downloadcounts, services, storage
from registry.fastpath import DownloadFastPath
from registry.models import DailyDownloads, Version
from registry.tokens import Actor
from tests.wsgi_calls import Behind, assert_same, both, call

if TYPE_CHECKING:
    from tests.factories import Publisher

pytest_plugins = ["tests.factories"]

URL = "/api/v1/extensions/{name}/versions/{version}/download"
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


@pytest.fixture
def apps() -> tuple[Any, DownloadFastPath]:
    """(Django's WSGI application, the fast path in front of it)."""
    django_app = get_wsgi_application()
    return django_app, DownloadFastPath(Behind(django_app))


@pytest.fixture
def etcd(private_storage: Any, publisher: Publisher, user: Any) -> dict[str, Any]:
    builds = {v: publisher("etcd", v) for v in ("3.5.9", "3.5.12", "1.0.0+build.7")}
    services.version_yank(actor=Actor(user=user), name="etcd", version="3.5.12", reason="broken")
    return {v: b["upload"] for v, b in builds.items()}


CASES = [
    pytest.param("3.5.9", "GET", {}, 200, 1, id="get"),
    pytest.param("3.5.9", "HEAD", {}, 200, 0, id="head"),
    pytest.param("3.5.12", "GET", {}, 200, 1, id="yanked-get"),
    pytest.param("3.5.12", "HEAD", {}, 200, 0, id="yanked-head"),
    pytest.param("1.0.0", "GET", {}, 200, 1, id="build-metadata-dropped"),
    pytest.param("1.0.0+zzz", "GET", {}, 200, 1, id="other-build-metadata"),
    pytest.param("3.5.9", "GET", {"HTTP_IF_NONE_MATCH": "SHA"}, 304, 0, id="if-none-match"),
    pytest.param("3.5.9", "GET", {"HTTP_IF_NONE_MATCH": "W/SHA"}, 304, 0, id="if-none-match-weak"),
    pytest.param("3.5.9", "GET", {"HTTP_IF_NONE_MATCH": '"x", SHA'}, 304, 0, id="if-none-match-list"),
    pytest.param("3.5.9", "GET", {"HTTP_IF_NONE_MATCH": "*"}, 304, 0, id="if-none-match-star"),
    pytest.param("3.5.9", "HEAD", {"HTTP_IF_NONE_MATCH": "SHA"}, 304, 0, id="head-if-none-match"),
    pytest.param("3.5.9", "GET", {"HTTP_IF_NONE_MATCH": '"0000"'}, 200, 1, id="stale-if-none-match"),
    pytest.param("3.5.9", "GET", {"HTTP_ACCEPT": "text/html"}, 200, 1, id="any-accept"),
    pytest.param("9.9.9", "GET", {}, 404, 0, id="unknown-version"),
    pytest.param("9.9", "GET", {}, 400, 0, id="not-a-version"),
    pytest.param("3.5.9", "POST", {}, 405, 0, id="post"),
]


@pytest.mark.parametrize(("version", "method", "headers", "status", "counted"), CASES)
def test_the_fast_path_answers_every_case_as_the_view_does(
    apps: tuple[Any, DownloadFastPath],
    etcd: dict[str, Any],
    version: str,
    method: str,
    headers: dict[str, str],
    status: int,
    counted: int,
) -> None:
    sha = etcd["3.5.9"]["sha256"]
    headers = {k: v.replace("SHA", f'"{sha}"') for k, v in headers.items()}
    view, fast = both(apps, URL.format(name="etcd", version=version), method, **headers)
    assert view.status == status
    assert view.counted == counted
    assert_same(view, fast)
    assert fast.passed_on is (status >= 400)  # the fast path answers every download it can serve
    if status == 200 and method == "GET":
        assert fast.sent_as_file  # gunicorn's sendfile
        assert hashlib.sha256(fast.body).hexdigest() == fast.headers["X-Checksum-Sha256"]
        assert fast.headers["Cache-Control"] == "public, max-age=31536000, immutable"
        assert fast.headers["Content-Length"] == str(len(fast.body))
    if status >= 400:
        assert fast.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    "path",
    [
        URL.format(name="nothing-here", version="1.0.0"),
        URL.format(name="Bad_Name", version="1.0.0"),
        URL.format(name="ab\x00c", version="1.0.0"),
        "/api/v1/extensions/etcd/versions/3.5.9/download/extra",
        "/api/v1/extensions/etcd/other/3.5.9/download",
    ],
)
def test_names_that_cannot_be_served_get_the_views_answer(
    apps: tuple[Any, DownloadFastPath], etcd: dict[str, Any], path: str
) -> None:
    view, fast = both(apps, path)
    assert view.status == 404
    assert_same(view, fast)


def test_a_package_missing_from_storage_is_the_views_503(
    apps: tuple[Any, DownloadFastPath], etcd: dict[str, Any]
) -> None:
    row = Version.objects.get(extension__name="etcd", version="3.5.9")
    storage.delete(row.storage_key)
    view, fast = both(apps, URL.format(name="etcd", version="3.5.9"))
    assert view.status == 503
    assert_same(view, fast)
    assert fast.passed_on
    assert json.loads(view.body)["error"]["message"] == "package storage could not be read; try again later"


@pytest.mark.parametrize("damage", [-1, +1], ids=["cut-short", "grown"])
def test_a_package_file_of_another_size_is_never_sent_as_the_package(
    apps: tuple[Any, DownloadFastPath],
    etcd: dict[str, Any],
    damage: int,
    caplog: pytest.LogCaptureFixture,
    settings: Any,
) -> None:
    """A file damaged on the disk after publishing is a 503 that says so, not a body that is not its
    Content-Length (a client's read would stop short, or take another answer's bytes for this one's)."""
    row = Version.objects.get(extension__name="etcd", version="3.5.9")
    path = storage.file_path(row.storage_key)
    with open(path, "r+b") as handle:
        handle.truncate(row.size + damage)
    view, fast = both(apps, URL.format(name="etcd", version="3.5.9"))
    assert view.status == 503
    assert_same(view, fast)
    assert json.loads(view.body)["error"] == {
        "code": "storage_unavailable",
        "message": "package storage holds a damaged copy of this file, which was not sent; try again later",
        "details": [],
    }
    assert view.headers["Retry-After"]
    assert f"stored object {row.storage_key} is {row.size + damage} bytes, not the {row.size} recorded" in caplog.text
    head_view, head_fast = both(apps, URL.format(name="etcd", version="3.5.9"), "HEAD")
    assert (head_view.status, head_fast.status) == (200, 200)  # the headers are the row's; no file is opened
    # Behind nginx, the registry checks the size before it lets nginx send the file.
    settings.REGISTRY_ACCEL_REDIRECT = "/_packages/"
    accel_view, accel_fast = both(apps, URL.format(name="etcd", version="3.5.9"))
    assert accel_view.status == 503
    assert_same(accel_view, accel_fast)
    assert "X-Accel-Redirect" not in accel_fast.headers


def test_with_x_accel_redirect_nginx_is_told_where_the_file_is(
    apps: tuple[Any, DownloadFastPath], etcd: dict[str, Any], settings: Any
) -> None:
    settings.REGISTRY_ACCEL_REDIRECT = "/_packages/"
    view, fast = both(apps, URL.format(name="etcd", version="3.5.9"))
    assert_same(view, fast)
    assert not fast.passed_on
    row = Version.objects.get(extension__name="etcd", version="3.5.9")
    assert (fast.status, fast.body, fast.counted) == (200, b"", 1)
    assert fast.headers["X-Accel-Redirect"] == f"/_packages/{row.storage_key}"
    assert fast.headers["Content-Disposition"] == 'attachment; filename="etcd-3.5.9.tar.gz"'
    head_view, head_fast = both(apps, URL.format(name="etcd", version="3.5.9"), "HEAD")
    assert_same(head_view, head_fast)
    assert "X-Accel-Redirect" not in head_fast.headers  # HEAD and 304 are answered here, not by nginx


@pytest.mark.s3
def test_with_s3_both_answer_the_same_presigned_redirect(
    apps: tuple[Any, DownloadFastPath], publisher: Publisher, s3_storage: Any
) -> None:
    import urllib.request

    upload = publisher("etcd", "3.5.9")["upload"]
    url = URL.format(name="etcd", version="3.5.9")
    for method, headers, status, counted in (
        ("GET", {}, 302, 1),
        ("HEAD", {}, 200, 0),
        ("GET", {"HTTP_IF_NONE_MATCH": f'"{upload["sha256"]}"'}, 304, 0),
    ):
        view, fast = both(apps, url, method, **headers)
        assert (view.status, view.counted) == (status, counted)
        assert_same(view, fast)
        assert not fast.passed_on
    view, fast = both(apps, url)
    assert fast.headers["Cache-Control"] == "private, no-store"
    with urllib.request.urlopen(fast.headers["Location"], timeout=10) as fetched:
        assert hashlib.sha256(fetched.read()).hexdigest() == upload["sha256"]


def test_no_download_writes_to_the_database_and_the_fast_path_reads_at_most_one_row(
    apps: tuple[Any, DownloadFastPath], etcd: dict[str, Any]
) -> None:
    view_app, fast_app = apps
    url = URL.format(name="etcd", version="3.5.9")
    with CaptureQueriesContext(connection) as first:
        assert call(fast_app, url).status == 200
    with CaptureQueriesContext(connection) as again:
        for _ in range(20):
            assert call(fast_app, url).status == 200
    with CaptureQueriesContext(connection) as view:
        for _ in range(5):
            assert call(view_app, url).status == 200
    assert len(first.captured_queries) == 1
    assert again.captured_queries == []  # name@version is cached: a package never changes
    every = first.captured_queries + view.captured_queries
    assert [q["sql"] for q in every if q["sql"].lstrip().upper().startswith(WRITES)] == []
    assert downloadcounts.pending_local() == 26
    assert Version.objects.get(extension__name="etcd", version="3.5.9").downloads == 0
    assert downloadcounts.flush() == 26
    assert Version.objects.get(extension__name="etcd", version="3.5.9").downloads == 26
    assert DailyDownloads.objects.get(version__version="3.5.9").count == 26


def test_a_version_published_after_a_miss_is_served_at_once(
    apps: tuple[Any, DownloadFastPath], private_storage: Any, publisher: Publisher
) -> None:
    _, fast_app = apps
    url = URL.format(name="etcd", version="3.5.9")
    assert call(fast_app, url).status == 404  # misses are never cached
    publisher("etcd", "3.5.9")
    assert call(fast_app, url).status == 200


def test_a_cached_version_is_answered_right_after_a_yank(
    apps: tuple[Any, DownloadFastPath], etcd: dict[str, Any], user: Any
) -> None:
    url = URL.format(name="etcd", version="3.5.9")
    before = call(apps[1], url)  # now cached
    services.version_yank(actor=Actor(user=user), name="etcd", version="3.5.9", reason="broken")
    view, fast = both(apps, url)
    assert_same(view, fast)
    assert (fast.status, fast.body, fast.headers) == (before.status, before.body, before.headers)  # still downloadable
