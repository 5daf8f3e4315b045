"""The periodic sweep: objects in package storage that no row references (a worker died between
storing and committing, or a removal failed) and staged uploads of finished builds are removed
once older than REGISTRY_SWEEP_GRACE_SECONDS (so in-flight publishes are never touched); static
index files that differ from their rows are rewritten (registry.staticindex); then the temporary
files of dead uploads and finished builds on this machine (`builds.workspace`)."""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from builds.models import Build
from builds.workspace import tmp_sweep
from registry import services as catalog
from registry import storage
from registry.models import NameLock, PackageLock, Version
from registry.staticindex import static_index_repair
from registry.trust import repository as trust

log = logging.getLogger(__name__)
_SHA256 = re.compile(r"[0-9a-f]{64}")


def storage_sweep(*, grace_seconds: int | None = None) -> dict[str, int]:
    grace = timedelta(seconds=settings.REGISTRY_SWEEP_GRACE_SECONDS if grace_seconds is None else grace_seconds)
    cutoff = timezone.now() - grace
    removed_packages = removed_uploads = 0
    referenced = set(Version.objects.values_list("storage_key", flat=True))
    for key, modified in storage.list_keys(storage.PACKAGES_PREFIX):
        if key in referenced or (modified is not None and modified > cutoff):
            continue
        sha256 = key.rsplit("/", 1)[-1].removesuffix(".tar.gz")
        if not _SHA256.fullmatch(sha256):
            # Not a package (a writer's leftover temporary file): removed, never taken for a digest.
            storage.delete(key)
            continue
        if catalog.package_discard(sha256=sha256, key=key):
            removed_packages += 1
            log.info("sweep: removed unreferenced package %s", key)
    for key in leftover_uploads(cutoff=cutoff):
        storage.delete(key)
        removed_uploads += 1
    # Lock rows are only needed while a publish runs; old ones are just clutter.
    PackageLock.objects.filter(touched_at__lt=cutoff).delete()
    NameLock.objects.filter(touched_at__lt=cutoff).delete()
    return {"packages": removed_packages, "uploads": removed_uploads}


def leftover_uploads(*, cutoff: datetime) -> list[str]:
    """Staged uploads that no unfinished build needs, last written before cutoff."""
    active = set(
        Build.objects.exclude(status__in=Build.FINAL).exclude(upload_key="").values_list("upload_key", flat=True)
    )
    return [
        key
        for key, modified in storage.list_keys(storage.UPLOADS_PREFIX)
        if key not in active and (modified is None or modified <= cutoff)
    ]


def sweep(*, grace_seconds: int | None = None) -> dict[str, int]:
    """The whole periodic sweep: the signed index first (storage a lost write left ahead of the
    database is re-signed from the rows, lost files written again, old metadata files removed),
    package storage, the static index files (every one checked against its row), then this
    machine's temporary files."""
    trust.maintain()
    trust_files = trust.sweep_files(grace_seconds=grace_seconds)
    result = storage_sweep(grace_seconds=grace_seconds)
    repaired = static_index_repair(grace_seconds=grace_seconds)
    temporary = tmp_sweep(grace_seconds=grace_seconds)
    return {
        **result,
        "static_index": repaired,
        "tmp_uploads": temporary["uploads"],
        "tmp_builds": temporary["builds"],
        "signed_index_files": trust_files,
    }
