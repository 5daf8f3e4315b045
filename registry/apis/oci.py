"""The OCI Distribution API, pull side (SPEC 7, distribution-spec 1.1), at ``/v2/``.

Plain Django views, not DRF: OCI clients need OCI's error body (``{"errors": [{"code", "message",
"detail"}]}``), no content negotiation of errors, and no authentication (reads are anonymous; an
``Authorization`` header is ignored). Every write method on every ``/v2/`` path answers 405
``UNSUPPORTED`` (the registry publishes through builds, SPEC 3.3), CSRF aside since nothing is
written. The reads are `registry.oci`'s.

Blobs: a config is rendered bytes; a layer is the package, streamed from storage as the download
endpoint streams it (a ``FileResponse``, which gunicorn sends with sendfile through
``wsgi.file_wrapper``, a ``Range`` as the descriptor's offset and ``Content-Length``) or, with
object storage, a 307 to a short-lived presigned URL (to which the client sends its ``Range``).
A single byte range is honoured (206, or 416 outside the blob); other ``Range`` forms are ignored
(the whole blob, 200), as RFC 9110 allows. A GET of a layer that starts at byte 0 counts a download.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import urllib.parse
from collections.abc import Callable
from typing import IO, Any

from django.db import DatabaseError
from django.http import FileResponse, HttpRequest, HttpResponse, HttpResponseBase
from django.urls import URLPattern, path, re_path
from django.views.decorators.csrf import csrf_exempt

from extensions.oci import INDEX_MEDIA_TYPE, REPOSITORY_PREFIX, accepts, is_tag
from registry import oci, services, storage
from registry.delivery import IMMUTABLE
from registry.errors import UNAVAILABLE_RETRY_AFTER, DatabaseUnavailable, StorageUnavailable, is_database_timeout
from registry.fastpath import BLOB_MEDIA_TYPE, OCI_API_VERSION, etag_matches
from registry.models import Version
from registry.oci import OciError

log = logging.getLogger(__name__)

READ_METHODS = ("GET", "HEAD")
JSON = "application/json"
REVALIDATE = "public, max-age=0, must-revalidate"  # a tag can move (a yank)
MAX_QUERY_DIGITS = 18
_RANGE_RE = re.compile(r"\s*bytes\s*=\s*(\d{0,18})\s*-\s*(\d{0,18})\s*", re.ASCII)

View = Callable[..., HttpResponseBase]


def _error_response(exc: OciError, *, head: bool) -> HttpResponse:
    response = HttpResponse(b"" if head else exc.body(), status=exc.status, content_type=JSON)
    for key, value in exc.headers.items():
        response[key] = value
    return response


def error_answer(request: HttpRequest, error: OciError) -> HttpResponse:
    """``error`` as every /v2 answer carries it, for an error met before the views (Django's
    handlers: a Host this registry does not serve; an outage met by a middleware)."""
    response = _error_response(error, head=request.method == "HEAD")
    response[OCI_API_VERSION[0]] = OCI_API_VERSION[1]
    return response


def _endpoint(view: View) -> View:
    """Read methods only, OCI errors, the API version header; never a 500 page."""

    @csrf_exempt
    @functools.wraps(view)
    def wrapper(request: HttpRequest, **kwargs: Any) -> HttpResponseBase:
        head = request.method == "HEAD"
        response: HttpResponseBase
        try:
            if request.method not in READ_METHODS:
                raise OciError(
                    405,
                    "UNSUPPORTED",
                    f"{request.method} is not supported: this registry serves OCI pulls only (GET and HEAD); "
                    "extensions are published with `provisioning extension publish` (POST /api/v1/extensions/)",
                    {"method": str(request.method)[:20], "allowed": list(READ_METHODS)},
                    headers={"Allow": ", ".join(READ_METHODS)},
                )
            response = view(request, **kwargs)
        except OciError as exc:
            response = _error_response(exc, head=head)
        except (StorageUnavailable, DatabaseError) as exc:
            message = "the registry is unavailable right now; try again later"
            what = "the registry's storage or database is unavailable"
            if is_database_timeout(exc):
                message = DatabaseUnavailable.for_error(exc).message
                what = "the database stopped a statement for time"
            log.exception("OCI %s %s: %s", request.method, request.path, what)
            retry = {"Retry-After": str(UNAVAILABLE_RETRY_AFTER)}
            unavailable = OciError(503, "UNAVAILABLE", message, headers=retry)
            response = _error_response(unavailable, head=head)
        except Exception:
            log.exception("OCI %s %s failed", request.method, request.path)
            response = _error_response(OciError(500, "UNKNOWN", "internal error; it has been logged"), head=head)
        response[OCI_API_VERSION[0]] = OCI_API_VERSION[1]
        return response

    return wrapper


# --- query parameters -------------------------------------------------------------------------------


def _n_param(request: HttpRequest) -> int | None:
    raw = request.GET.get("n")
    if raw is None or raw == "":
        return None
    if not raw.isascii() or not raw.isdigit() or len(raw) > MAX_QUERY_DIGITS:
        raise OciError(
            400,
            "UNSUPPORTED",
            f"the query parameter n is {raw[:40]!r}: use a whole number, 0 or more (at most {oci.MAX_PAGE} are "
            "answered at once; the Link header names the next page)",
            {"parameter": "n"},
        )
    return int(raw)


def _last_param(request: HttpRequest, *, tag: bool) -> str | None:
    raw = request.GET.get("last")
    if raw is None or raw == "":
        return None
    if (tag and not is_tag(raw)) or len(raw) > 256:
        raise OciError(
            400,
            "UNSUPPORTED",
            f"the query parameter last is {raw[:40]!r}: use the last "
            + ("tag" if tag else "repository")
            + " of the previous page (as the Link header gives it)",
            {"parameter": "last"},
        )
    return raw


def _json(data: Any, *, head: bool, content_type: str = JSON, status: int = 200) -> HttpResponse:
    body = json.dumps(data).encode("utf-8")
    response = HttpResponse(b"" if head else body, status=status, content_type=content_type)
    response["Content-Length"] = str(len(body))
    return response


def _paged(request: HttpRequest, url: str, key: str, extra: dict[str, Any], page: oci.Page) -> HttpResponse:
    response = _json({**extra, key: page.items}, head=request.method == "HEAD")
    if page.next_last is not None:
        n = len(page.items)
        query = urllib.parse.urlencode({"n": n, "last": page.next_last})
        response["Link"] = f'<{url}?{query}>; rel="next"'
    return response


# --- the endpoints ----------------------------------------------------------------------------------


@_endpoint
def base(request: HttpRequest) -> HttpResponseBase:
    """``GET /v2/``: this registry implements the distribution-spec (pull)."""
    return _json({}, head=request.method == "HEAD")


@_endpoint
def catalog(request: HttpRequest) -> HttpResponseBase:
    """``GET /v2/_catalog?n=&last=``: every repository (Docker's extension, for mirroring tools)."""
    page = oci.repositories_page(n=_n_param(request), last=_last_param(request, tag=False))
    return _paged(request, "/v2/_catalog", "repositories", {}, page)


@_endpoint
def tags(request: HttpRequest, repository: str) -> HttpResponseBase:
    """``GET /v2/extensions/NAME/tags/list?n=&last=``: the versions as tags, lexical order."""
    name = oci.extension_name(repository)
    page = oci.tags_page(name, n=_n_param(request), last=_last_param(request, tag=True))
    return _paged(request, f"/v2/{REPOSITORY_PREFIX}{name}/tags/list", "tags", {"name": repository}, page)


@_endpoint
def manifests(request: HttpRequest, repository: str, reference: str) -> HttpResponseBase:
    """``GET``/``HEAD /v2/extensions/NAME/manifests/{tag or digest}``: an OCI image manifest."""
    name = oci.extension_name(repository)
    answer = oci.manifest_get(name, reference)
    document = answer.document
    accept = request.META.get("HTTP_ACCEPT", "")
    if not accepts(accept, document.media_type):
        raise OciError(
            404,
            "MANIFEST_UNKNOWN",
            f"{repository}:{reference[:80]} is an OCI image manifest ({document.media_type}), and this request "
            f"accepts only {accept[:200]}: add {document.media_type} to Accept (this registry serves no Docker "
            "manifests)",
            {"mediaType": document.media_type, "accept": accept[:200]},
        )
    etag = f'"{document.digest}"'
    head = request.method == "HEAD"
    response = HttpResponse(status=304) if etag_matches(request.META.get("HTTP_IF_NONE_MATCH", ""), etag) else None
    if response is None:
        response = HttpResponse(b"" if head else document.data, content_type=document.media_type)
        response["Content-Length"] = str(document.size)
    response["Docker-Content-Digest"] = document.digest
    response["ETag"] = etag
    response["Cache-Control"] = IMMUTABLE if answer.by_digest else REVALIDATE
    response["Vary"] = "Accept"
    return response


def _byte_range(request: HttpRequest, size: int, etag: str) -> tuple[int, int] | None:
    """The single byte range asked for (first, last inclusive), None for the whole blob, or 416."""
    header = request.META.get("HTTP_RANGE", "")
    if not header:
        return None
    if_range = request.META.get("HTTP_IF_RANGE", "")
    if if_range and if_range.strip() != etag:
        return None  # the client's copy is of something else: send it all
    match = _RANGE_RE.fullmatch(header)
    if match is None or match.group(1) == match.group(2) == "":
        return None  # several ranges, another unit, or malformed: ignored (RFC 9110 14.2)
    first, last = match.groups()
    if first == "":  # the last N bytes
        suffix = int(last)
        if suffix == 0:
            raise _unsatisfiable(header, size)
        return max(0, size - suffix), size - 1
    start = int(first)
    if start >= size:
        raise _unsatisfiable(header, size)
    end = int(last) if last else size - 1
    if end < start:
        return None  # invalid (RFC 9110 14.1.1): ignored
    return start, min(end, size - 1)


def _unsatisfiable(header: str, size: int) -> OciError:
    return OciError(
        416,
        "UNSUPPORTED",
        f"the range {header[:60]!r} is outside the blob's {size} bytes: ask for bytes=FIRST-LAST with FIRST "
        f"below {size}",
        {"size": size},
        headers={"Content-Range": f"bytes */{size}"},
    )


class _FileSlice:
    """``length`` bytes of an open file from its current offset: FileResponse streams it with
    bounded reads, and gunicorn's sendfile (through ``fileno``) sends ``Content-Length`` bytes from
    the descriptor's offset."""

    def __init__(self, handle: IO[bytes], length: int) -> None:
        self._handle = handle
        self._left = length

    def read(self, size: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        data = self._handle.read(self._left if size is None or size < 0 else min(size, self._left))
        self._left -= len(data)
        return data

    def fileno(self) -> int:
        return self._handle.fileno()

    def close(self) -> None:
        self._handle.close()


@_endpoint
def blobs(request: HttpRequest, repository: str, digest: str) -> HttpResponseBase:
    """``GET``/``HEAD /v2/extensions/NAME/blobs/DIGEST``: the package or a config, with ``Range``."""
    name = oci.extension_name(repository)
    blob = oci.blob_get(name, digest)
    etag = f'"{blob.digest}"'
    headers = {"Docker-Content-Digest": blob.digest, "ETag": etag, "Accept-Ranges": "bytes", "Cache-Control": IMMUTABLE}
    response: HttpResponseBase
    if etag_matches(request.META.get("HTTP_IF_NONE_MATCH", ""), etag):
        response = HttpResponse(status=304)
    elif request.method == "HEAD":
        response = HttpResponse(content_type=BLOB_MEDIA_TYPE)
        response["Content-Length"] = str(blob.size)
    else:
        wanted = _byte_range(request, blob.size, etag)
        start, end = wanted if wanted is not None else (0, blob.size - 1)
        if blob.data is not None:
            response = HttpResponse(blob.data[start : end + 1], content_type=BLOB_MEDIA_TYPE)
        elif storage.is_s3():
            assert blob.storage_key is not None
            response = HttpResponse(status=307)
            response["Location"] = storage.presigned_url(blob.storage_key, filename=blob.filename)
            headers["Cache-Control"] = "private, no-store"  # the presigned URL expires
        else:
            assert blob.storage_key is not None
            handle = storage.open_sized(blob.storage_key, blob.size)
            if wanted is None:
                response = FileResponse(handle, content_type=BLOB_MEDIA_TYPE)
            else:
                handle.seek(start)
                response = FileResponse(_FileSlice(handle, end - start + 1), content_type=BLOB_MEDIA_TYPE)
        if response.status_code != 307:
            if blob.storage_key is not None:  # a package: its own file name (not the storage key's)
                response["Content-Disposition"] = f'attachment; filename="{blob.filename}"'
            response["Content-Length"] = str(end - start + 1)
            if wanted is not None:
                response.status_code = 206
                response["Content-Range"] = f"bytes {start}-{end}/{blob.size}"
        if blob.version_id is not None and blob.extension_id is not None and start == 0:
            services.version_record_download(version=Version(pk=blob.version_id, extension_id=blob.extension_id))
    for key, value in headers.items():
        response[key] = value
    return response


@_endpoint
def referrers(request: HttpRequest, repository: str, digest: str) -> HttpResponseBase:
    """``GET /v2/extensions/NAME/referrers/DIGEST[?artifactType=T]``: the manifests referring to it."""
    name = oci.extension_name(repository)
    artifact_type = request.GET.get("artifactType")
    answer = oci.referrers_get(name, digest, artifact_type=artifact_type or None)
    head = request.method == "HEAD"
    response = HttpResponse(b"" if head else answer.index.data, content_type=INDEX_MEDIA_TYPE)
    response["Content-Length"] = str(answer.index.size)
    if answer.filtered:
        response["OCI-Filters-Applied"] = "artifactType"
    return response


@_endpoint
def uploads(request: HttpRequest, repository: str, upload: str | None = None) -> HttpResponseBase:
    """``/v2/NAME/blobs/uploads/...``: no upload exists (writes are 405 before this)."""
    raise OciError(
        404,
        "BLOB_UPLOAD_UNKNOWN",
        "there are no uploads: this registry serves OCI pulls only; extensions are published with "
        "`provisioning extension publish` (POST /api/v1/extensions/)",
    )


@_endpoint
def unknown(request: HttpRequest) -> HttpResponseBase:
    """Any other path under ``/v2``."""
    raise OciError(
        404,
        "UNSUPPORTED",
        f"no OCI endpoint at {request.path[:120]}: this registry serves /v2/, /v2/_catalog and, for each "
        f"repository {REPOSITORY_PREFIX}NAME, /v2/{REPOSITORY_PREFIX}NAME/tags/list, .../manifests/{{tag or "
        "digest}, .../blobs/{digest} and .../referrers/{digest}",
        {"path": request.path[:120]},
    )


urlpatterns: list[URLPattern] = [
    path("v2/", base, name="oci-base"),
    path("v2/_catalog", catalog, name="oci-catalog"),
    re_path(r"^v2/(?P<repository>[\s\S]+)/tags/list\Z", tags, name="oci-tags"),
    re_path(r"^v2/(?P<repository>[\s\S]+)/manifests/(?P<reference>[^/]+)\Z", manifests, name="oci-manifest"),
    re_path(r"^v2/(?P<repository>[\s\S]+)/blobs/uploads(?:/(?P<upload>[\s\S]*))?\Z", uploads, name="oci-upload"),
    re_path(r"^v2/(?P<repository>[\s\S]+)/blobs/(?P<digest>[^/]+)\Z", blobs, name="oci-blob"),
    re_path(r"^v2/(?P<repository>[\s\S]+)/referrers/(?P<digest>[^/]+)\Z", referrers, name="oci-referrers"),
    re_path(r"^v2(?:/[\s\S]*)?\Z", unknown, name="oci-unknown"),
]
