"""WSGI fast paths for the two hottest reads, answered before Django's request machinery
(middleware, URL resolution, request and response objects), which costs several times the work:

- ``GET``/``HEAD /api/v1/index/{name}`` (`IndexFastPath`): index documents are pre-rendered on the
  extension's row (registry.indexdocs), so serving one is a single indexed SELECT; same bytes,
  ETag, 304 and cache headers as the view (registry.apis.resolve.index_document).
- ``GET``/``HEAD /api/v1/extensions/{name}/versions/{version}/download`` (`DownloadFastPath`): at
  most one indexed SELECT (none once name@version is cached: a version's package never changes),
  then the answer of registry.delivery, the one the view gives too: the file through
  ``wsgi.file_wrapper`` (gunicorn sends it with sendfile), X-Accel-Redirect, or the presigned
  redirect. The download is counted outside the database (registry.downloadcounts).

- ``GET /v2/extensions/NAME/blobs/sha256:HEX`` (`BlobFastPath`): an OCI client's pull of a
  package layer, whole (no ``Range``, no ``If-None-Match``), from files storage: the same lookup,
  cache and file sending as a download, and the headers of registry.apis.oci's blob view; a
  config blob, a range, a conditional request or object storage goes to the view.

Each hands everything it does not serve — unknown names or versions, bad spellings, other methods,
database or storage errors — to Django, whose view gives the proper error envelope; but a statement
the database stopped for time (its statement_timeout) is answered 503 here, as the view would, since
the view would wait for the same statement again. Tests check that both paths give identical
answers, headers included (Django's middleware headers are added here as the middleware would:
registry.httpheaders).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from http import HTTPStatus
from typing import IO, Any

from django.db import DEFAULT_DB_ALIAS, connections

from extensions.errors import VersionError
from extensions.names import NAME_RE
from extensions.oci import REPOSITORY_PREFIX
from extensions.versions import SemVer
from registry import delivery, services, storage
from registry.errors import UNAVAILABLE_RETRY_AFTER, DatabaseUnavailable, StorageUnavailable, is_database_timeout
from registry.exception_handler import error_body
from registry.httpheaders import etag_matches, is_api_path, is_oci_path, middleware_headers
from registry.indexdocs import document_body
from registry.oci import OciError

log = logging.getLogger(__name__)

PREFIX = "/api/v1/index/"
CACHE_CONTROL = "public, max-age=0, must-revalidate"
# Read through the driver's own cursor (Django's cursor wrapper costs more than the query itself),
# so in the driver's placeholder style: sqlite3's ?, psycopg's %s.
_QUERY = "SELECT index_etag, index_json FROM registry_extension WHERE name = %s"
_QUERIES = {"sqlite": _QUERY.replace("%s", "?")}

__all__ = ["CACHE_CONTROL", "PREFIX", "BlobFastPath", "DownloadFastPath", "IndexFastPath", "etag_matches"]

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def _index_row(name: str) -> tuple[str, str] | None:
    """The extension's (index_etag, index_json), or None: one indexed SELECT on this thread's
    connection, through the driver's cursor. A database error is Django's (wrap_database_errors
    marks the connection, so that the request's fallback to the view, or the next request,
    replaces a broken one)."""
    db = connections[DEFAULT_DB_ALIAS]
    if db.connection is None:
        db.ensure_connection()
    with db.wrap_database_errors:
        cursor = db.connection.cursor()
        try:
            cursor.execute(_QUERIES.get(db.vendor, _QUERY), (name,))
            row: tuple[str, str] | None = cursor.fetchone()
        finally:
            cursor.close()
    return row


def answer_error(
    environ: dict[str, Any],
    start_response: StartResponse,
    status: int,
    code: str,
    message: str,
    headers: Sequence[tuple[str, str]] = (),
    *,
    compact: bool = False,
) -> list[bytes]:
    """An error the WSGI layer answers itself: the API's envelope under /api/ (``compact`` as DRF's
    views render it, else as Django's JsonResponse), the OCI error document under /v2/ (this
    registry takes no writes there: UNSUPPORTED, or UNAVAILABLE for a 503), plain text elsewhere;
    the middleware's headers and ``headers``."""
    path = environ.get("PATH_INFO", "")
    if is_api_path(path):
        separators = (",", ":") if compact else None
        body = json.dumps(error_body(code, message), separators=separators).encode()
        content_type = "application/json"
    elif is_oci_path(path):
        body = OciError(status, "UNAVAILABLE" if status == 503 else "UNSUPPORTED", message).body()
        content_type, headers = "application/json", [*headers, OCI_API_VERSION]
    else:
        body, content_type = f"{message}\n".encode(), "text/plain; charset=utf-8"
    sent = [("Content-Type", content_type), ("Content-Length", str(len(body))), *middleware_headers(), *headers]
    start_response(f"{status} {HTTPStatus(status).phrase}", sent)
    return [] if environ.get("REQUEST_METHOD") == "HEAD" else [body]


def _fall_back(
    exc: Exception,
    what: str,
    environ: dict[str, Any],
    start_response: StartResponse,
    headers: Sequence[tuple[str, str]] = (),
    *,
    compact: bool = False,
) -> Iterable[bytes] | None:
    """After an error in a fast path: None, so that the view answers (and says what is wrong), or
    the view's 503 (``headers``, ``compact``: as that view answers) for a statement the database
    stopped for time, which the view would wait for again."""
    if not is_database_timeout(exc):
        log.warning("%s fast path: falling back to the view", what, exc_info=exc)
        return None
    log.error("%s fast path: the database stopped a statement for time", what, exc_info=exc)
    error = DatabaseUnavailable.for_error(exc)
    sent = [*headers, ("Retry-After", str(UNAVAILABLE_RETRY_AFTER))]
    return answer_error(environ, start_response, 503, error.code, error.message, sent, compact=compact)


class IndexFastPath:
    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self._common: list[tuple[str, str]] | None = None

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "")
        if path.startswith(PREFIX) and method in ("GET", "HEAD"):
            name = path[len(PREFIX) :]
            if NAME_RE.match(name):
                answer = self._serve(name, environ, start_response, head=method == "HEAD")
                if answer is not None:
                    return answer
        return self.app(environ, start_response)

    def _serve(
        self, name: str, environ: dict[str, Any], start_response: StartResponse, *, head: bool
    ) -> Iterable[bytes] | None:
        try:
            row = _index_row(name)
        except Exception as exc:  # noqa: BLE001 - _fall_back logs it and says who answers
            return _fall_back(exc, "index", environ, start_response)
        if row is None or not row[1]:
            return None  # the view answers the 404 envelope
        etag = f'"{row[0]}"'
        if self._common is None:
            self._common = middleware_headers()
        headers = [("ETag", etag), ("Cache-Control", CACHE_CONTROL), ("Vary", "Accept-Encoding"), *self._common]
        if etag_matches(environ.get("HTTP_IF_NONE_MATCH", ""), etag):
            start_response("304 Not Modified", headers)
            return []
        body = document_body(row[1])
        headers += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        start_response("200 OK", headers)
        return [] if head else [body]


DOWNLOAD_PREFIX = "/api/v1/extensions/"
DOWNLOAD_SUFFIX = "/download"
DOWNLOAD_ALLOW = "GET, HEAD"  # what the view (DRF) announces (OPTIONS is a 405 there); a test compares
CACHED_REFS = 10_000  # name@version entries kept per process (about 2 MB)
_BLOCK = 256 * 1024
_REASONS = {200: "200 OK", 302: "302 Found", 304: "304 Not Modified"}


def _chunks(handle: IO[bytes]) -> Iterator[bytes]:
    """The file in blocks, for a server without wsgi.file_wrapper."""
    with handle:
        while block := handle.read(_BLOCK):
            yield block


class _RefCache:
    """Packages found, by their address: immutable, so kept (at most CACHED_REFS per process);
    a miss is never kept (it may be published in a moment)."""

    def __init__(self) -> None:
        self._refs: dict[tuple[str, str], delivery.PackageRef] = {}

    def get(self, key: tuple[str, str], lookup: Callable[[], delivery.PackageRef | None]) -> delivery.PackageRef | None:
        ref = self._refs.get(key)
        if ref is None:
            ref = lookup()
            if ref is None:
                return None
            if len(self._refs) >= CACHED_REFS:
                self._refs.clear()
            self._refs[key] = ref
        return ref


def _send(environ: dict[str, Any], handle: IO[bytes]) -> Iterable[bytes]:
    """The file as the body: through gunicorn's sendfile (wsgi.file_wrapper) when there is one."""
    wrapper = environ.get("wsgi.file_wrapper")
    return wrapper(handle, _BLOCK) if wrapper is not None else _chunks(handle)


class DownloadFastPath:
    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self._refs = _RefCache()
        self._common: list[tuple[str, str]] | None = None

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "")
        if path.endswith(DOWNLOAD_SUFFIX) and path.startswith(DOWNLOAD_PREFIX) and method in ("GET", "HEAD"):
            parts = path[len(DOWNLOAD_PREFIX) : -len(DOWNLOAD_SUFFIX)].split("/")
            if len(parts) == 3 and parts[1] == "versions" and NAME_RE.match(parts[0]):
                answer = self._serve(parts[0], parts[2], environ, start_response, head=method == "HEAD")
                if answer is not None:
                    return answer
        return self.app(environ, start_response)

    def _ref(self, name: str, version: str) -> delivery.PackageRef | None:
        def lookup() -> delivery.PackageRef | None:
            try:
                canonical = str(SemVer.parse(version).without_build())
            except VersionError:
                return None  # the view answers the 400 that explains the spelling
            return delivery.package_lookup(name=name, canonical=canonical)

        return self._refs.get((name, version), lookup)

    def _serve(
        self, name: str, version: str, environ: dict[str, Any], start_response: StartResponse, *, head: bool
    ) -> Iterable[bytes] | None:
        handle: IO[bytes] | None = None
        try:
            ref = self._ref(name, version)
            if ref is None:
                return None
            reply = delivery.answer(ref, head=head, if_none_match=environ.get("HTTP_IF_NONE_MATCH", ""))
            if reply.send_file:
                handle = storage.open_sized(ref.storage_key, ref.size)
        except StorageUnavailable:
            return None  # (logged) the view answers the 503 that says why
        except Exception as exc:  # noqa: BLE001 - _fall_back logs it and says who answers
            allow = [("Allow", DOWNLOAD_ALLOW)]  # a DRF view's answer
            return _fall_back(exc, "download", environ, start_response, allow, compact=True)
        if self._common is None:
            self._common = [("Allow", DOWNLOAD_ALLOW), *middleware_headers()]
        if reply.counted:
            services.version_record_download(version=ref)
        start_response(_REASONS[reply.status], reply.headers + self._common)
        return [] if handle is None else _send(environ, handle)


BLOB_PREFIX = f"/v2/{REPOSITORY_PREFIX}"
BLOB_MEDIA_TYPE = "application/octet-stream"  # what an OCI blob is served as (registry.apis.oci too)
OCI_API_VERSION = ("Docker-Distribution-API-Version", "registry/2.0")
_BLOB_PATH = re.compile(rf"{re.escape(BLOB_PREFIX)}([^/]+)/blobs/sha256:([0-9a-f]{{64}})", re.ASCII)


class BlobFastPath:
    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self._refs = _RefCache()
        self._common: list[tuple[str, str]] | None = None

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if (
            path.startswith(BLOB_PREFIX)
            and environ.get("REQUEST_METHOD") == "GET"
            and "HTTP_RANGE" not in environ
            and "HTTP_IF_NONE_MATCH" not in environ
        ):
            match = _BLOB_PATH.fullmatch(path)
            if match and NAME_RE.match(match[1]):
                answer = self._serve(match[1], match[2], environ, start_response)
                if answer is not None:
                    return answer
        return self.app(environ, start_response)

    def _serve(
        self, name: str, sha256: str, environ: dict[str, Any], start_response: StartResponse
    ) -> Iterable[bytes] | None:
        try:
            if storage.is_s3():
                return None  # the view's 307 to a presigned URL
            # None for a config or referrer blob, or none at all: the view answers.
            ref = self._refs.get((name, sha256), lambda: delivery.package_by_digest(name=name, sha256=sha256))
            if ref is None:
                return None
            handle = storage.open_sized(ref.storage_key, ref.size)
        except StorageUnavailable:
            return None  # (logged) the view answers the 503 that says why
        except Exception as exc:  # noqa: BLE001 - _fall_back logs it and says who answers
            return _fall_back(exc, "blob", environ, start_response)
        if self._common is None:
            self._common = middleware_headers()
        digest = f"sha256:{ref.sha256}"
        headers = [
            ("Content-Type", BLOB_MEDIA_TYPE),
            ("Content-Disposition", f'attachment; filename="{ref.filename}"'),
            ("Content-Length", str(ref.size)),
            ("Docker-Content-Digest", digest),
            ("ETag", f'"{digest}"'),
            ("Accept-Ranges", "bytes"),
            ("Cache-Control", delivery.IMMUTABLE),
            OCI_API_VERSION,
            *self._common,
        ]
        services.version_record_download(version=ref)
        start_response("200 OK", headers)
        return _send(environ, handle)
