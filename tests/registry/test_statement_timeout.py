"""A statement PostgreSQL stops for time (its ``statement_timeout`` or ``lock_timeout``, set in
DATABASE_URL's ``options`` as docs/deploy.md advises for web nodes): the request answers 503
``database_unavailable`` saying the database did not answer in time (the catalog's pages: their
503 page), after one wait, not a 500 or a thread held for as long as the lock lasts; the fast paths
answer it themselves rather than hand it to a view that would wait again; once the lock is gone
the same requests answer 200."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from django.core.wsgi import get_wsgi_application
from django.db import DatabaseError
from django.db.utils import DatabaseErrorWrapper

from registry.errors import DatabaseUnavailable, StorageUnavailable, is_database_timeout
from registry.fastpath import BlobFastPath, DownloadFastPath, IndexFastPath
from registry.views import unavailable
from tests.live_registry import LiveRegistry
from tests.wsgi_calls import assert_same, both, call

pytest_plugins = ["tests.factories"]

TIMEOUT_MS = 500
TIMED_OUT = "did not answer in time"


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.parametrize("setting", ["statement_timeout", "lock_timeout"])
def test_requests_behind_a_lock_answer_503_after_one_wait_and_200_once_it_is_gone(
    tmp_path: Path, postgres_server: Any, setting: str
) -> None:
    database = postgres_server.create_database("registry_timeout")
    registry = LiveRegistry(tmp_path / "registry", database_url=database)
    registry.start()  # migrated and published without the timeout, as docs/deploy.md says
    registry.manage("publish", "--user", "alice", "extensions/taskservs/etcd/3.5.9")
    [entry] = httpx.get(f"{registry.url}/api/v1/index/etcd").json()["data"]["versions"]
    registry.stop()
    registry.env["DATABASE_URL"] = f"{database}?options=-c%20{setting}%3D{TIMEOUT_MS}"
    registry.start()
    try:
        paths = {
            "/api/v1/extensions/": "api",
            "/api/v1/extensions/etcd/": "api",
            "/api/v1/index/etcd": "api",  # the index fast path
            "/api/v1/extensions/etcd/versions/3.5.9/download": "api",  # the download fast path
            "/v2/extensions/etcd/manifests/3.5.9": "oci",
            f"/v2/extensions/etcd/blobs/sha256:{entry['sha256']}": "oci",  # the blob fast path
            "/extensions/etcd/": "page",
        }
        with psycopg.connect(database) as locker:
            # What a migration rewriting the tables holds, or a session left in a transaction.
            locker.execute("LOCK TABLE registry_extension, registry_version IN ACCESS EXCLUSIVE MODE")
            for path, kind in paths.items():
                started = time.monotonic()
                answer = httpx.get(registry.url + path, timeout=60)
                took = time.monotonic() - started
                assert answer.status_code == 503, (path, answer.status_code, answer.text[:300])
                assert answer.headers["Retry-After"]
                assert took < 10, f"{path} held its request for {took:.1f} s"
                if kind == "api":
                    error = answer.json()["error"]
                    assert error["code"] == "database_unavailable"
                    # PostgreSQL's reason: "canceling statement due to statement timeout" (lock timeout)
                    assert TIMED_OUT in error["message"] and setting.replace("_", " ") in error["message"], path
                elif kind == "oci":
                    [error] = answer.json()["errors"]
                    assert error["code"] == "UNAVAILABLE" and TIMED_OUT in error["message"], path
                else:
                    assert answer.headers["Content-Type"].startswith("text/html")
                    assert "did not answer in time. Try again in a few seconds" in answer.text
            locker.rollback()
        log = registry.log.read_text()
        assert "stopped a statement for time" in log
        # Each waited once: no fast path handed its timed-out request to the view to wait again.
        assert "falling back to the view" not in log
        for path in paths:
            assert httpx.get(registry.url + path, timeout=60).status_code == 200, path
    finally:
        registry.stop()


def _django_error(driver_error: Exception) -> DatabaseError:
    """driver_error as Django raises it: its own class of the same name, from the driver's."""
    wrapper = DatabaseErrorWrapper(type("Connection", (), {"Database": psycopg, "errors_occurred": False})())
    try:
        with wrapper:
            raise driver_error
    except DatabaseError as exc:
        return exc
    raise AssertionError("not raised")


@pytest.mark.parametrize(
    ("driver_error", "timed_out"),
    [
        (psycopg.errors.QueryCanceled("canceling statement due to statement timeout"), True),
        (psycopg.errors.LockNotAvailable("canceling statement due to lock timeout"), True),
        (psycopg.errors.AdminShutdown("terminating connection due to administrator command"), False),
        (psycopg.OperationalError("connection refused"), False),
    ],
)
def test_only_a_statement_stopped_for_time_is_said_to_be_one(driver_error: Exception, timed_out: bool) -> None:
    error = _django_error(driver_error)
    assert is_database_timeout(error) is timed_out
    message = DatabaseUnavailable.for_error(error).message
    assert (TIMED_OUT in message) is timed_out
    if not timed_out:
        assert message == DatabaseUnavailable().message


@pytest.mark.parametrize(
    ("path", "fast_path"),
    [
        ("/api/v1/index/etcd", IndexFastPath),
        ("/api/v1/extensions/etcd/versions/3.5.9/download", DownloadFastPath),
        ("/v2/extensions/etcd/blobs/sha256:{sha256}", BlobFastPath),
    ],
)
def test_a_fast_paths_503_for_a_statement_stopped_for_time_is_its_views(
    private_storage: Any, publisher: Any, monkeypatch: pytest.MonkeyPatch, path: str, fast_path: Any
) -> None:
    """Status, every header and the body: as the view answers the same timeout."""
    sha256 = publisher("etcd", "3.5.9")["upload"]["sha256"]

    def timed_out(*args: Any, **kwargs: Any) -> None:
        raise _django_error(psycopg.errors.QueryCanceled("canceling statement due to statement timeout"))

    django_app = get_wsgi_application()
    with monkeypatch.context() as patch:  # undone before the test database's teardown queries
        patch.setattr("django.db.backends.utils.CursorWrapper.execute", timed_out)
        patch.setattr("registry.fastpath._index_row", timed_out)
        view, fast = both((django_app, fast_path(django_app)), path.format(sha256=sha256))
    assert view.status == 503 and TIMED_OUT in view.body.decode()
    assert_same(view, fast)


@pytest.mark.parametrize(
    ("driver_error", "says", "not_says"),
    [
        (
            psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
            "did not answer in time",
            "cannot reach",
        ),
        (psycopg.OperationalError("connection refused"), "cannot reach its database", "did not answer"),
    ],
)
def test_the_catalogs_503_page_says_whether_the_database_is_down_or_slow(
    private_storage: Any,
    publisher: Any,
    monkeypatch: pytest.MonkeyPatch,
    driver_error: Exception,
    says: str,
    not_says: str,
) -> None:
    publisher("etcd", "3.5.9")

    def failing(*args: Any, **kwargs: Any) -> None:
        raise _django_error(driver_error)

    django_app = get_wsgi_application()
    with monkeypatch.context() as patch:  # undone before the test database's teardown queries
        patch.setattr("django.db.backends.utils.CursorWrapper.execute", failing)
        page = call(django_app, "/extensions/etcd/")
    text = page.body.decode()
    assert page.status == 503 and page.headers["Retry-After"] and page.headers["Content-Type"].startswith("text/html")
    assert says in text and not_says not in text and "Try again in a few seconds" in text
    assert "canceling statement" not in text and "connection refused" not in text  # the API says why; a page does not


def test_the_catalogs_503_page_for_storage_says_storage(rf: Any) -> None:
    page = unavailable(rf.get("/extensions/etcd/"), StorageUnavailable())
    text = page.content.decode()
    assert page.status_code == 503 and page["Retry-After"] and page["Content-Security-Policy"]
    assert "cannot reach its storage" in text and "database" not in text and "nothing was published" not in text
