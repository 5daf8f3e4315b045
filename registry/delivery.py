"""How a package download is answered: one definition for the Django view
(registry.apis.downloads) and the WSGI fast path (registry.fastpath), so both send the same
status, headers and bytes in every case.

- ``If-None-Match`` naming the package's ETag (its quoted sha256): 304, not counted;
- ``HEAD``: 200 with the headers only, not counted;
- object storage: 302 to a short-lived presigned URL, counted, never cached;
- files storage with REGISTRY_ACCEL_REDIRECT: 200 with ``X-Accel-Redirect`` to the internal
  location (nginx sends the file), counted;
- files storage: 200 with the file (gunicorn sends it with sendfile), counted.

A package is immutable (name@version always means the same bytes), so every answer but the
redirect is ``Cache-Control: public, max-age=31536000, immutable``. Yanked versions stay
downloadable: no answer depends on the yanked state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection

from registry import storage
from registry.httpheaders import etag_matches
from registry.models import Version

PACKAGE_MEDIA_TYPE = "application/gzip"
IMMUTABLE = "public, max-age=31536000, immutable"
PRESIGNED = "private, no-store"  # the presigned URL expires


@dataclass(frozen=True)
class PackageRef:
    """What a download needs to know of a version; immutable, so it may be cached by name@version."""

    pk: int
    extension_id: int
    filename: str  # NAME-VERSION.tar.gz, VERSION as published
    sha256: str
    size: int
    storage_key: str


def ref_of(version: Version) -> PackageRef:
    return PackageRef(
        pk=version.pk,
        extension_id=version.extension_id,
        filename=f"{version.extension.name}-{version.version}.tar.gz",
        sha256=version.sha256,
        size=version.size,
        storage_key=version.storage_key,
    )


_SELECT_REF = (
    "SELECT v.id, v.extension_id, e.name, v.version, v.sha256, v.size, v.storage_key"
    " FROM registry_version v JOIN registry_extension e ON e.id = v.extension_id"
)
_LOOKUP = _SELECT_REF + " WHERE e.name = %s AND v.canonical = %s"


def package_lookup(*, name: str, canonical: str) -> PackageRef | None:
    """The package of name@version (canonical: without build metadata) in one indexed SELECT
    (both lookups are unique indexes), or None. The name must be valid (NUL would be a database
    error on PostgreSQL)."""
    with connection.cursor() as cursor:
        cursor.execute(_LOOKUP, [name, canonical])
        row = cursor.fetchone()
    return None if row is None else _ref_of_row(row)


_BY_DIGEST = _SELECT_REF + " WHERE e.name = %s AND v.sha256 = %s"


def package_by_digest(*, name: str, sha256: str) -> PackageRef | None:
    """The package of NAME whose sha256 is this (an OCI layer pull), in one indexed SELECT, or None."""
    with connection.cursor() as cursor:
        cursor.execute(_BY_DIGEST, [name, sha256])
        row = cursor.fetchone()
    return None if row is None else _ref_of_row(row)


def _ref_of_row(row: tuple[Any, ...]) -> PackageRef:
    pk, extension_id, extension, version, sha256, size, key = row
    return PackageRef(pk, extension_id, f"{extension}-{version}.tar.gz", sha256, int(size), key)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: list[tuple[str, str]]
    send_file: bool  # the body is the package file (else empty)
    counted: bool  # a download to count


def answer(ref: PackageRef, *, head: bool, if_none_match: str) -> Answer:
    """The answer to GET (head=False) or HEAD of the package, given the request's If-None-Match.
    Raises StorageUnavailable when the presigned URL cannot be made, or when the file nginx is to
    send (X-Accel-Redirect) is not the package's size."""
    etag = f'"{ref.sha256}"'
    headers = [("ETag", etag), ("X-Checksum-Sha256", ref.sha256)]
    if etag_matches(if_none_match, etag):
        # Content-Length as a 200 would send it (RFC 9110 8.6), for a cache to refresh its entry.
        return Answer(304, [*headers, ("Cache-Control", IMMUTABLE), ("Content-Length", str(ref.size))], False, False)
    described = [
        *headers,
        ("Content-Type", PACKAGE_MEDIA_TYPE),
        ("Content-Disposition", f'attachment; filename="{ref.filename}"'),
        ("Cache-Control", IMMUTABLE),
    ]
    if head:
        return Answer(200, [*described, ("Content-Length", str(ref.size))], False, False)
    if storage.is_s3():
        location = storage.presigned_url(ref.storage_key, filename=ref.filename)
        redirect = [*headers, ("Location", location), ("Cache-Control", PRESIGNED), ("Content-Length", "0")]
        return Answer(302, redirect, False, True)
    accel = settings.REGISTRY_ACCEL_REDIRECT
    if accel:
        # nginx answers with the file at that internal location, keeping these headers.
        storage.check_size(ref.storage_key, ref.size)
        sent = [*described, ("X-Accel-Redirect", accel + ref.storage_key), ("Content-Length", "0")]
        return Answer(200, sent, False, True)
    return Answer(200, [*described, ("Content-Length", str(ref.size))], True, True)
