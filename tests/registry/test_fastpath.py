"""The WSGI fast path for index documents answers exactly as the Django view does, and hands
everything it does not serve to Django."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from wsgiref.util import setup_testing_defaults

import pytest
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import OperationalError, close_old_connections, connections
from django.test import Client
from django.urls import reverse

from registry.fastpath import PREFIX, IndexFastPath, _index_row

if TYPE_CHECKING:
    from tests.factories import Publisher

pytest_plugins = ["tests.factories"]
pytestmark = pytest.mark.usefixtures("private_storage")


def call(app: Any, path: str, method: str = "GET", **headers: str) -> tuple[int, dict[str, str], bytes]:
    environ: dict[str, Any] = {"PATH_INFO": path, "REQUEST_METHOD": method, "wsgi.input": io.BytesIO(b"")}
    setup_testing_defaults(environ)
    environ["SERVER_NAME"] = "testserver"
    environ["HTTP_HOST"] = "testserver"
    environ.update(headers)
    captured: dict[str, Any] = {}

    def start_response(status: str, response_headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        captured["status"] = int(status.split()[0])
        captured["headers"] = dict(response_headers)

    body = b"".join(app(environ, start_response))
    return captured["status"], captured["headers"], body


@pytest.fixture
def fast() -> Iterator[IndexFastPath]:
    # As Django's test client does: the test's transaction must outlive each request.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield IndexFastPath(get_wsgi_application())
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def test_it_serves_the_same_bytes_and_headers_as_the_view(
    fast: IndexFastPath, client: Client, publisher: Publisher
) -> None:
    publisher("etcd", "3.5.9")
    publisher("etcd", "3.5.12")
    view = client.get("/api/v1/index/etcd")
    status, headers, body = call(fast, "/api/v1/index/etcd")
    assert status == 200
    assert body == view.content
    assert headers["ETag"] == view["ETag"]
    assert headers["Cache-Control"] == view["Cache-Control"]
    assert headers["Content-Type"] == "application/json"
    assert int(headers["Content-Length"]) == len(body)


def test_it_answers_304_and_head_like_the_view(fast: IndexFastPath, client: Client, publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    etag = client.get("/api/v1/index/etcd")["ETag"]
    status, headers, body = call(fast, "/api/v1/index/etcd", HTTP_IF_NONE_MATCH=f'"x", W/{etag}')
    assert (status, body, headers["ETag"]) == (304, b"", etag)
    status, headers, body = call(fast, "/api/v1/index/etcd", "HEAD")
    assert (status, body) == (200, b"")
    assert int(headers["Content-Length"]) > 0


def test_it_sees_a_publish_at_once(fast: IndexFastPath, publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    _, first, _ = call(fast, "/api/v1/index/etcd")
    publisher("etcd", "3.5.12")
    status, second, body = call(fast, "/api/v1/index/etcd", HTTP_IF_NONE_MATCH=first["ETag"])
    assert status == 200 and second["ETag"] != first["ETag"]
    assert b'"3.5.12"' in body


@pytest.mark.parametrize(
    ("path", "method", "expected"),
    [
        ("/api/v1/index/nothing-here", "GET", 404),  # unknown: the view's 404 envelope
        ("/api/v1/index/Bad_Name", "GET", 404),  # not a name: the view decides
        ("/api/v1/index/ab\x00c", "GET", 404),  # not even storable: never reaches the database
        ("/api/v1/index/etcd", "POST", 405),  # other methods: the view decides
        ("/healthz", "GET", 200),  # everything else is Django's
    ],
)
def test_everything_else_goes_to_django(fast: IndexFastPath, db: None, path: str, method: str, expected: int) -> None:
    status, headers, body = call(fast, path, method)
    assert status == expected
    assert headers["Content-Type"].startswith("application/json")
    if expected == 404:
        assert b'"code":"not_found"' in body.replace(b" ", b"")


def test_its_prefix_is_the_index_documents_route() -> None:
    # The fast path matches before URL resolution, so it keeps the prefix as a constant: the route's.
    assert reverse("index-document", kwargs={"name": "etcd"}) == PREFIX + "etcd"


class _FailingConnection:
    """A driver connection whose every query fails as a lost server's would."""

    def __init__(self, error: type[Exception]) -> None:
        self.error = error

    def cursor(self) -> Any:
        return self

    def execute(self, *args: Any) -> None:
        raise self.error("server closed the connection unexpectedly")

    def close(self) -> None:
        pass


def test_a_database_error_is_djangos_and_marks_the_connection(db: None) -> None:
    # The read goes through the driver's cursor, but an error is Django's, and the connection is
    # marked so that Django replaces it (close_if_unusable_or_obsolete) before it is used again.
    database = connections["default"]
    database.ensure_connection()
    real = database.connection
    driver = database.Database  # type: ignore[attr-defined]  # sqlite3 or psycopg
    database.connection = _FailingConnection(driver.OperationalError)
    try:
        with pytest.raises(OperationalError, match="closed the connection"):
            _index_row("etcd")
        assert database.errors_occurred
    finally:
        database.connection = real
        database.errors_occurred = False


def test_when_the_read_fails_the_view_answers(
    fast: IndexFastPath, publisher: Publisher, monkeypatch: pytest.MonkeyPatch
) -> None:
    publisher("etcd", "3.5.9")
    served = call(fast, "/api/v1/index/etcd")  # by the fast path (the same as the view's: above)

    def failing(name: str) -> None:
        raise OperationalError("the database is restarting")

    monkeypatch.setattr("registry.fastpath._index_row", failing)
    request_started.disconnect(close_old_connections)  # the publisher's test client connected it again
    request_finished.disconnect(close_old_connections)
    status, headers, body = call(fast, "/api/v1/index/etcd")  # by the view
    assert (status, body, headers["ETag"]) == (200, served[2], served[1]["ETag"])


def test_the_read_returns_the_row_or_none(publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    etag, text = _index_row("etcd") or ("", "")
    assert len(etag) == 64 and '"3.5.9"' in text
    assert _index_row("nothing-here") is None
