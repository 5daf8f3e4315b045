"""Calling WSGI applications as gunicorn does, to compare a fast path's answers with the Django
view's: status, every header, body, whether it was sent as a file, downloads counted."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit
from wsgiref.util import setup_testing_defaults

from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from registry import downloadcounts


class FileWrapper:
    """What gunicorn passes as wsgi.file_wrapper (it sends .filelike with sendfile)."""

    def __init__(self, filelike: Any, blksize: int = 8192) -> None:
        self.filelike = filelike
        self.blksize = blksize

    def __iter__(self) -> Iterator[bytes]:
        while chunk := self.filelike.read(self.blksize):
            yield chunk

    def close(self) -> None:
        close = getattr(self.filelike, "close", None)
        if close is not None:
            close()


class Behind:
    """The application behind a fast path (``FastPath(Behind(django_app))``): counts the requests
    the fast path passed on to it, so that a test knows which of the two answered."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.calls = 0

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        self.calls += 1
        return self.app(environ, start_response)


class Reply:
    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes, sent_as_file: bool) -> None:
        self.status, self.body, self.sent_as_file = status, body, sent_as_file
        self.header_list = headers
        self.headers = dict(headers)
        self.counted = 0  # downloads counted while answering
        self.passed_on: bool | None = None  # a fast path's: whether the view behind it answered


def call(app: Any, path: str, method: str = "GET", **headers: str) -> Reply:
    environ: dict[str, Any] = {"PATH_INFO": path, "REQUEST_METHOD": method, "wsgi.input": io.BytesIO(b"")}
    setup_testing_defaults(environ)
    environ.update(SERVER_NAME="testserver", HTTP_HOST="testserver", **{"wsgi.file_wrapper": FileWrapper})
    environ.update(headers)
    captured: dict[str, Any] = {}

    def start_response(status: str, response_headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        captured["status"] = int(status.split()[0])
        captured["headers"] = response_headers

    # As Django's test client does: the test's transaction must outlive each request (the client
    # connects close_old_connections again after each of its requests, so disconnect it here).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        result = app(environ, start_response)
        try:
            body = b"".join(result)
        finally:
            if hasattr(result, "close"):
                result.close()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    return Reply(captured["status"], captured["headers"], body, isinstance(result, FileWrapper))


def both(apps: tuple[Any, Any], path: str, method: str = "GET", **headers: str) -> tuple[Reply, Reply]:
    """The view's answer and the fast path's, with how many downloads each counted (and, for a fast
    path in front of `Behind`, whether it passed the request on)."""
    view_app, fast_app = apps
    behind = getattr(fast_app, "app", None)
    calls = behind.calls if isinstance(behind, Behind) else None
    replies = []
    for app in (view_app, fast_app):
        before = downloadcounts.pending_local()
        reply = call(app, path, method, **headers)
        reply.counted = downloadcounts.pending_local() - before
        replies.append(reply)
    if calls is not None:
        assert isinstance(behind, Behind)
        replies[1].passed_on = behind.calls > calls
    return replies[0], replies[1]


def assert_same(view: Reply, fast: Reply) -> None:
    assert fast.status == view.status
    assert fast.body == view.body
    assert fast.counted == view.counted
    if "Location" in view.headers:  # a presigned URL is signed anew each time: compare the object
        assert urlsplit(fast.headers.pop("Location")).path == urlsplit(view.headers.pop("Location")).path
    assert fast.headers == view.headers, (fast.headers, view.headers)
    assert len(fast.header_list) == len(view.header_list)  # no header twice
