"""The temporary files of uploads and builds, all under REGISTRY_TMP_DIR (``REGISTRY_DATA_DIR/tmp``)
and named by whose they are, so that nothing is left behind by a process that died:

- ``upload-<id>.<n>.part``: a multipart file as it streams in (`builds.uploads`); ``<id>`` becomes
  the id of the build the upload is submitted as;
- ``build-<id>-<attempt>/``: the work directory of one attempt at a build (the fetched upload, the
  extracted and built trees, the sandbox's own temporary files).

`tmp_sweep` removes an upload's files once its build exists (the upload has been staged in
storage) or once they have not changed for the grace period (the upload never became a build),
and a build's directory once the build is final, or when the attempt is not the build's current
one, or when no such build exists (after the grace period). A live upload or build is never
touched: every process sweeps only the directory of its own machine.
"""

from __future__ import annotations

import logging
import re
import shutil
import time
import uuid
from pathlib import Path

from django.conf import settings

from builds.models import Build

log = logging.getLogger(__name__)

_UPLOAD_RE = re.compile(r"upload-(?P<id>[0-9a-f-]{36})\.\d+\.part")
_BUILD_RE = re.compile(r"build-(?P<id>[0-9a-f-]{36})-(?P<attempt>\d+)")


def tmp_dir() -> Path:
    path = Path(settings.REGISTRY_TMP_DIR)
    path.mkdir(parents=True, exist_ok=True)
    return path


def new_upload_id() -> uuid.UUID:
    return uuid.uuid4()


def upload_path(upload_id: uuid.UUID, index: int) -> Path:
    return tmp_dir() / f"upload-{upload_id}.{index}.part"


def build_dir(build_id: object, attempt: int) -> Path:
    """A new, empty work directory for one attempt at a build (0700)."""
    path = tmp_dir() / f"build-{build_id}-{attempt}"
    if path.exists():  # a leftover of the same attempt number (a reaped, re-claimed build)
        shutil.rmtree(path, ignore_errors=True)
    path.mkdir(mode=0o700)
    return path


def _age(path: Path, now: float) -> float:
    try:
        return now - path.lstat().st_mtime
    except FileNotFoundError:
        return 0.0


def tmp_sweep(*, grace_seconds: float | None = None) -> dict[str, int]:
    """Remove what dead uploads and finished builds left in this machine's REGISTRY_TMP_DIR."""
    grace = settings.REGISTRY_SWEEP_GRACE_SECONDS if grace_seconds is None else grace_seconds
    root = Path(settings.REGISTRY_TMP_DIR)
    if not root.is_dir():
        return {"uploads": 0, "builds": 0}
    now = time.time()
    entries = list(root.iterdir())
    ids = set()
    for entry in entries:
        match = _UPLOAD_RE.fullmatch(entry.name) or _BUILD_RE.fullmatch(entry.name)
        if match:
            ids.add(match.group("id"))
    known = {
        str(pk): (status, attempts)
        for pk, status, attempts in Build.objects.filter(pk__in=list(ids)).values_list("pk", "status", "attempts")
    }
    removed = {"uploads": 0, "builds": 0}
    for entry in entries:
        old = _age(entry, now) > grace
        if match := _UPLOAD_RE.fullmatch(entry.name):
            if match.group("id") in known or old:
                entry.unlink(missing_ok=True)
                removed["uploads"] += 1
        elif match := _BUILD_RE.fullmatch(entry.name):
            state = known.get(match.group("id"))
            if state is None:
                done = old
            else:
                status, attempts = state
                done = status in Build.FINAL or int(match.group("attempt")) != attempts
            if done:
                shutil.rmtree(entry, ignore_errors=True)
                removed["builds"] += 1
        elif old:
            # Not ours by name (a tool's leftover): removed once it is old.
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
    if removed["uploads"] or removed["builds"]:
        log.info("sweep: removed %d upload and %d build temporary files", removed["uploads"], removed["builds"])
    return removed


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    if path.exists():
        log.warning("could not remove %s; the sweeper will", path)
