"""The static index: every index document also as a file in package storage, ``index/NAME``
(under REGISTRY_DATA_DIR/packages/, or the bucket's prefix), holding exactly the bytes that
``GET /api/v1/index/NAME`` answers, so that nginx or a CDN can serve the index without Python
(docs/deploy.md shows the nginx configuration).

The database row stays the source of truth (registry.indexdocs renders it inside the changing
transaction); the file is written after that transaction commits (`static_index_refresh`, called
by `registry.services.extension_refresh` for every publish, yank and unyank), from the row as it
then is. A process that dies between the commit and the write, or a storage outage, leaves a file
behind its row: `static_index_repair` rewrites every file whose bytes differ from its row's
document (each web process's background thread for recently changed extensions in embedded mode,
Celery beat's ``registry.repair_static_index`` with a broker, and the hourly sweep for all).

Other static metadata (the signed index) can be written beside it: hook in next to
`static_index_refresh` in `registry.services.extension_refresh`.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from extensions.names import is_valid_name
from registry import storage
from registry.errors import StorageUnavailable
from registry.indexdocs import document_body
from registry.models import Extension

log = logging.getLogger(__name__)

INDEX_PREFIX = "index"
MEDIA_TYPE = "application/json"


def index_key(name: str) -> str:
    return f"{INDEX_PREFIX}/{name}"


def static_index_refresh(extension: Extension) -> None:
    """Call inside the transaction that re-rendered the extension's index document: its static
    file is written once that transaction commits (never before: a reader of the file must never
    see a document the database rolled back)."""
    if not settings.REGISTRY_STATIC_INDEX:
        return
    name = extension.name
    transaction.on_commit(lambda: _write_after_commit(name))


def _write_after_commit(name: str) -> None:
    try:
        static_index_write(name=name)
    except Exception:  # the change is committed; the repair writes the file later
        log.warning("static index: could not write %s; the repair will", index_key(name), exc_info=True)


def _write_if_changed(name: str, text: str) -> bool:
    """Write the document unless the file already holds it; returns whether it wrote."""
    body = document_body(text)
    if storage.read_small(index_key(name)) == body:
        return False
    storage.replace(index_key(name), body, content_type=MEDIA_TYPE)
    return True


def static_index_write(*, name: str) -> bool:
    """Bring index/NAME up to date with the row; returns whether it wrote. If the row changed
    while the file was written (a concurrent publish), it writes again, so the last writer leaves
    the newest document."""
    wrote = False
    for _ in range(3):
        row = Extension.objects.filter(name=name).values_list("index_etag", "index_json").first()
        if row is None or not row[1]:
            return wrote
        wrote = _write_if_changed(name, row[1]) or wrote
        if Extension.objects.filter(name=name, index_etag=row[0]).exists():
            return wrote
    return wrote


def static_index_repair(*, updated_since: datetime | None = None, grace_seconds: int | None = None) -> int:
    """Rewrite every static index file whose bytes differ from its row's document (all of them,
    or those of extensions changed since ``updated_since``); with every extension, also remove
    files no extension owns (a writer's leftover temporary file) once older than the grace.
    Returns how many files it wrote. Does nothing when REGISTRY_STATIC_INDEX is off."""
    if not settings.REGISTRY_STATIC_INDEX:
        return 0
    rows = Extension.objects.exclude(index_json="").order_by("pk")
    if updated_since is not None:
        rows = rows.filter(updated_at__gte=updated_since)
    written = 0
    for name, text in rows.values_list("name", "index_json").iterator(chunk_size=500):
        try:
            if _write_if_changed(name, text):
                written += 1
                log.info("static index: repaired %s", index_key(name))
        except StorageUnavailable:
            log.warning("static index: storage unavailable; repair stopped")
            return written
    if updated_since is None:
        grace = settings.REGISTRY_SWEEP_GRACE_SECONDS if grace_seconds is None else grace_seconds
        cutoff = timezone.now() - timedelta(seconds=grace)
        for key, modified in storage.list_keys(INDEX_PREFIX):
            name = key.removeprefix(INDEX_PREFIX + "/")
            if is_valid_name(name) and "/" not in name:
                continue
            if modified is None or modified < cutoff:
                storage.delete(key)
    return written
