"""The build pipeline's entry points: submit an upload as a build (stage it, enqueue after the
commit) and run a build (claim it, run the pipeline under a heartbeat, finish it in an explicit
final state). The pieces live in `builds.lifecycle` (claims, heartbeat, final states, the reaper),
`builds.steplog` (the build log), `builds.queue` (sending to the workers) and `builds.pipeline`
(the steps)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.db import transaction

from builds import lifecycle, pipeline, queue
from builds.models import Build
from builds.steplog import StepLog, log_entry
from registry import storage
from registry.errors import Forbidden, StorageUnavailable, Unauthenticated, classify_error
from registry.tokens import Actor

log = logging.getLogger(__name__)


def require_submit_rights(actor: Actor) -> None:
    """Who may submit a build at all (the API and the web catalog's publish page): a user, through
    a session or a token with some publish scope. Which names they may publish is the pipeline's
    validate step (registry.services.publish_check)."""
    if not actor.is_authenticated:
        raise Unauthenticated("publishing needs a token: send 'Authorization: Bearer pvr_...'")
    if not actor.has_any_scope("publish"):
        raise Forbidden("this token has no publish scope: it needs publish:NAME or publish:*")


def build_submit(*, actor: Actor, kind: str, upload: Any, filename: str, build_id: uuid.UUID | None = None) -> Build:
    """Record a build for an upload (already streamed to a local temporary file and hashed), stage
    the upload where any worker can read it, and enqueue the pipeline after the commit. The build
    takes ``build_id`` (the upload's id, which names its temporary files) when given."""
    require_submit_rights(actor)
    sha256 = getattr(upload, "sha256", "")
    build = Build.objects.create(
        **({"id": build_id} if build_id is not None else {}),
        kind=kind,
        submitted_by=actor.user,
        token=actor.token,
        token_prefix=actor.token.prefix if actor.token is not None else "",
        address=actor.address,
        filename=filename[:255],
        upload_sha256=sha256,
        upload_size=upload.size,
        log=[log_entry("upload", "passed", f"received {upload.size} bytes, sha256 {sha256}")],
    )
    key = storage.upload_key(str(build.id))
    try:
        upload.seek(0)
        storage.put(key, upload)
    except StorageUnavailable as exc:
        lifecycle.finish_failed(build, attempt=None, code=exc.code, message=exc.message, details=[])
        raise
    Build.objects.filter(pk=build.pk).update(upload_key=key)
    transaction.on_commit(lambda: queue.enqueue(str(build.pk)))
    return build


def build_run(build_id: str) -> None:
    """Run the pipeline for a build, if it can be claimed. Safe to call twice (idempotent)."""
    attempt = lifecycle.build_claim(build_id)
    if attempt is None:
        log.info("build %s: nothing to do (final, or claimed by another worker)", build_id)
        return
    build = Build.objects.select_related("submitted_by").get(pk=build_id)
    steps = StepLog(build, attempt)
    if attempt > 1:
        steps.add("retry", "passed", f"attempt {attempt}: the previous worker stopped before finishing")
    with lifecycle.heartbeat(build_id, attempt):
        try:
            pipeline.run(build=build, attempt=attempt, actor=lifecycle.build_actor(build), steps=steps)
        except Exception as exc:
            error = classify_error(exc, reference=f"build {build_id}")
            if error.origin == "platform" and error.code == "internal_error":
                log.error("build %s failed on the registry's side", build_id, exc_info=exc)
                details: list[Any] = [{"build": str(build_id)}]
                extra = getattr(exc, "details", "")
                if isinstance(extra, str) and extra:
                    log.error("build %s: the sandbox's traceback:\n%s", build_id, extra)
            else:
                details = error.details
            lifecycle.finish_failed(build, attempt=attempt, code=error.code, message=error.message, details=details)
