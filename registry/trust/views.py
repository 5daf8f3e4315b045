"""``GET /tuf/metadata/NAME`` and ``GET /tuf/targets/PATH``: the signed index's files, as storage
holds them. nginx or a CDN can serve the same files without Django (docs/deploy.md): every name
but ``timestamp.json`` is immutable, so it is served ``immutable`` with a year's max-age;
timestamp.json is revalidated on every use.

In embedded mode (no Celery beat) a request for timestamp.json that finds it due re-signs it first."""

from __future__ import annotations

import logging
import re

from django.conf import settings
from django.http import FileResponse, HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.views.decorators.http import require_safe

from registry import storage
from registry.errors import RegistryError
from registry.trust import repository
from registry.trust.models import TrustTarget
from registry.trust.targets import parse_served

log = logging.getLogger(__name__)

_METADATA = re.compile(r"(?:[1-9][0-9]{0,9}\.)?(?:root|targets|snapshot|bin-[0-9a-f]{1,8})\.json|timestamp\.json")
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "public, max-age=0, must-revalidate"


def _not_found(what: str) -> HttpResponse:
    return HttpResponse(f"{what}\n", status=404, content_type="text/plain")


def _serve(
    key: str, *, content_type: str, cache: str, filename: str | None = None, length: int | None = None
) -> HttpResponseBase:
    """The stored file; with ``length`` (a package's, from its row) only a file of that length."""
    try:
        if not storage.exists(key):
            return _not_found(f"no such file: {key}")
        handle = storage.open_file(key) if length is None else storage.open_sized(key, length)
    except RegistryError:
        return HttpResponse(
            "storage unavailable\n", status=503, content_type="text/plain", headers={"Retry-After": "5"}
        )
    response = FileResponse(handle, content_type=content_type)
    response["Cache-Control"] = cache
    if filename:
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@require_safe
def metadata(request: HttpRequest, name: str) -> HttpResponseBase:
    if not _METADATA.fullmatch(name):
        return _not_found("no such metadata")
    if name == "timestamp.json":
        due = repository.timestamp_due() or not storage.exists(repository.TIMESTAMP_KEY)
        if settings.CELERY_TASK_ALWAYS_EAGER and due:
            try:
                repository.maintain()
            except Exception:
                log.warning("signed index: could not re-sign the timestamp", exc_info=True)
        return _serve(repository.TIMESTAMP_KEY, content_type="application/json", cache=REVALIDATE)
    return _serve(f"{repository.METADATA_PREFIX}/{name}", content_type="application/json", cache=IMMUTABLE)


@require_safe
def target(request: HttpRequest, path: str) -> HttpResponseBase:
    served = parse_served(path)
    if served is None:
        return _not_found("no such target")
    kind, target_path, sha256 = served
    key = kind.storage_key(target_path, sha256)
    basename = target_path.rsplit("/", 1)[-1]
    if kind.name == "packages":
        # Only what the signed index lists (or listed) under this name: never an arbitrary object.
        rows = TrustTarget.objects.filter(path=target_path, sha256=sha256)
        length = rows.values_list("length", flat=True).first()
        if length is None:
            return _not_found("no such target")
        if storage.is_s3():
            try:
                return HttpResponseRedirect(storage.presigned_url(key, filename=basename))
            except RegistryError:
                return HttpResponse("storage unavailable\n", status=503, content_type="text/plain")
        return _serve(key, content_type="application/gzip", cache=IMMUTABLE, filename=basename, length=length)
    return _serve(key, content_type=kind.media_type, cache=IMMUTABLE)
