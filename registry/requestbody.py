"""Request bodies sent without a length. Django reads a body only as far as ``CONTENT_LENGTH``
says, so a body sent with ``Transfer-Encoding: chunked`` (HTTP/1.1 allows it; httpx and requests
send an iterator's body that way) would reach the views as empty. gunicorn and granian de-chunk
such a body and say where it ends (``wsgi.input_terminated``): `with_sized_bodies` reads it into
a spooled temporary file, at most the largest body the registry takes, and hands it on with its
length, so the views see it as if it had been sent with one. A body past that limit is refused
413 (``archive_too_large``); one whose end the server cannot tell, 411 (``length_required``)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Iterator
from typing import IO, Any

from django.conf import settings

from registry.exception_handler import error_body
from registry.fastpath import StartResponse, WSGIApp
from registry.httpheaders import is_api_path, middleware_headers

#: Room for the multipart framing around an uploaded package, beyond the package limit.
MULTIPART_SLACK = 64 * 1024
#: What a body without a length may hold in memory before it goes to a temporary file.
SPOOL_IN_MEMORY = 1024 * 1024
_CHUNK = 64 * 1024
#: Methods whose requests carry no body here: nothing is read for them, whatever their framing.
BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})
_REASONS = {400: "Bad Request", 411: "Length Required", 413: "Content Too Large"}


def largest_body() -> int:
    """The largest request body the registry takes: a package at its limit, in multipart framing."""
    return int(settings.REGISTRY_MAX_PACKAGE_BYTES) + MULTIPART_SLACK


def with_sized_bodies(app: WSGIApp) -> WSGIApp:
    """app, given every request body with its CONTENT_LENGTH (see the module)."""

    def application(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if (
            environ.get("CONTENT_LENGTH")
            or environ.get("REQUEST_METHOD", "GET") in BODILESS
            or not environ.get("HTTP_TRANSFER_ENCODING", "").strip()
        ):
            return app(environ, start_response)
        if not environ.get("wsgi.input_terminated"):
            return _refuse(
                environ, start_response, 411, "length_required",
                "this server cannot tell where a request body without a Content-Length header ends: "
                "send the body with its Content-Length",
            )  # fmt: skip
        limit = largest_body()
        # Closed by _Closing once the answer is sent, or here on a refusal.
        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY, dir=str(settings.REGISTRY_TMP_DIR))  # noqa: SIM115
        try:
            size = _copy(environ["wsgi.input"], spool, limit)
        except (OSError, ValueError):  # the client went away, or sent broken chunks
            spool.close()
            return _refuse(environ, start_response, 400, "bad_request", "the request body was cut short")
        if size > limit:
            spool.close()
            return _refuse(
                environ, start_response, 413, "archive_too_large",
                f"the request body is larger than the limit of {limit} bytes (a package of at most "
                f"{settings.REGISTRY_MAX_PACKAGE_BYTES} bytes, in multipart framing)",
            )  # fmt: skip
        spool.seek(0)
        environ["CONTENT_LENGTH"] = str(size)
        environ["wsgi.input"] = spool
        return _Closing(app(environ, start_response), spool)

    return application


def _copy(source: IO[bytes], target: IO[bytes], limit: int) -> int:
    """Copies at most limit + 1 bytes of source into target; returns how many it copied."""
    size = 0
    while size <= limit:
        chunk = source.read(min(_CHUNK, limit + 1 - size))
        if not chunk:
            break
        target.write(chunk)
        size += len(chunk)
    return size


def _refuse(
    environ: dict[str, Any], start_response: StartResponse, status: int, code: str, message: str
) -> list[bytes]:
    if is_api_path(environ.get("PATH_INFO", "")):
        body, content_type = json.dumps(error_body(code, message)).encode(), "application/json"
    else:
        body, content_type = f"{message}\n".encode(), "text/plain; charset=utf-8"
    headers = [("Content-Type", content_type), ("Content-Length", str(len(body))), *middleware_headers()]
    # The body was not read (or not all of it): the connection cannot carry another request.
    headers.append(("Connection", "close"))
    start_response(f"{status} {_REASONS[status]}", headers)
    return [body]


class _Closing:
    """The application's answer, closing the spooled body once the server has sent it."""

    def __init__(self, answer: Iterable[bytes], spool: IO[bytes]) -> None:
        self._answer = answer
        self._spool = spool

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._answer)

    def close(self) -> None:
        try:
            close = getattr(self._answer, "close", None)
            if close is not None:
                close()
        finally:
            self._spool.close()
