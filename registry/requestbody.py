"""Request bodies sent without a length. Django reads a body only as far as ``CONTENT_LENGTH``
says, so a body sent with ``Transfer-Encoding: chunked`` (HTTP/1.1 allows it; httpx and requests
send an iterator's body that way) would reach the views as empty. gunicorn and granian de-chunk
such a body and say where it ends (``wsgi.input_terminated``): `with_sized_bodies` reads it, at
most ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (what a JSON body may be), into memory and hands it on with
its length, so the views see it as if it had been sent with one.

It is read before anyone is authenticated, so no more than that is: a larger body (a package
upload) must come with its ``Content-Length``, which lets the endpoint refuse an unauthenticated or
oversized upload before reading a byte of it. Such a body, or one whose end the server cannot
tell, is refused 411 (``length_required``)."""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import IO, Any

from django.conf import settings

from registry.fastpath import StartResponse, WSGIApp, answer_error

_CHUNK = 64 * 1024
#: Methods whose requests carry no body here: nothing is read for them, whatever their framing.
BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})


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
        limit = int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        body = io.BytesIO()
        try:
            size = _copy(environ["wsgi.input"], body, limit)
        except (OSError, ValueError):  # the client went away, or sent broken chunks
            return _refuse(environ, start_response, 400, "bad_request", "the request body was cut short")
        if size > limit:
            return _refuse(
                environ, start_response, 411, "length_required",
                f"a request body without a Content-Length header may hold at most {limit} bytes: "
                "send a larger one (a package upload) with its Content-Length",
            )  # fmt: skip
        body.seek(0)
        environ["CONTENT_LENGTH"] = str(size)
        environ["wsgi.input"] = body
        return app(environ, start_response)

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
    # The body was not read (or not all of it): the connection cannot carry another request.
    return answer_error(environ, start_response, status, code, message, [("Connection", "close")])
