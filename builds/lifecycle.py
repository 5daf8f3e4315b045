"""The life of a build: claimed with a conditional UPDATE, kept alive by a heartbeat, finished in
an explicit final state (only by the attempt that owns it), and re-queued or failed by the reaper
when its worker stops beating."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import Q
from django.utils import timezone

from builds import queue
from builds.models import Build
from registry import storage
from registry.errors import StorageUnavailable, Unauthenticated
from registry.models import ApiToken, AuditEvent
from registry.services import audit
from registry.storedtext import nul_escaped
from registry.tokens import Actor

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3


def _stale_running(now: datetime) -> Q:
    """Running builds whose worker stopped beating (or never beat) before the stale cut-off."""
    stale = now - timedelta(seconds=settings.REGISTRY_BUILD_STALE_SECONDS)
    return Q(status=Build.Status.RUNNING) & (
        Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True, started_at__lt=stale)
    )


def _fail_interrupted(build: Build) -> bool:
    """Fail a build whose workers kept stopping: it has used up its attempts."""
    return finish_failed(
        build,
        attempt=build.attempts,
        code="internal_error",
        message=f"the build was interrupted {build.attempts} times (its worker stopped); build {build.pk}",
        details=[],
    )


def build_claim(build_id: str) -> int | None:
    """Claim a queued build (or a running one whose worker stopped beating): returns the attempt
    number that now owns it, or None when someone else owns it or it is already final."""
    now = timezone.now()
    claimable = Q(status=Build.Status.QUEUED) | _stale_running(now)
    for _ in range(3):
        build = Build.objects.filter(pk=build_id).only("status", "attempts").first()
        if build is None or build.status in Build.FINAL:
            return None
        attempt = build.attempts + 1
        if attempt > MAX_ATTEMPTS:
            # Only a build that could be claimed (its last worker stopped) has run out of attempts;
            # a duplicate message for a live last attempt leaves it alone.
            if Build.objects.filter(claimable, pk=build_id, attempts=build.attempts).exists():
                _fail_interrupted(build)
            return None
        claimed = Build.objects.filter(claimable, pk=build_id, attempts=build.attempts).update(
            status=Build.Status.RUNNING, attempts=attempt, started_at=now, heartbeat_at=now
        )
        if claimed == 1:
            return attempt
        if not Build.objects.filter(claimable, pk=build_id).exists():
            return None
    return None


@contextlib.contextmanager
def heartbeat(build_id: str, attempt: int) -> Iterator[None]:
    """While a build runs (on a worker, or in a web process in embedded mode), refresh its
    heartbeat, so that a build whose process died is noticed by the reaper."""
    stop = threading.Event()
    interval = max(1.0, settings.REGISTRY_BUILD_HEARTBEAT_SECONDS)

    def beat() -> None:
        # A failed beat (the database restarting) is tried again at the next one: a build that
        # outlives a short outage keeps its claim instead of being taken over while it runs.
        try:
            while not stop.wait(interval):
                try:
                    Build.objects.filter(pk=build_id, attempts=attempt, status=Build.Status.RUNNING).update(
                        heartbeat_at=timezone.now()
                    )
                except Exception as exc:  # noqa: BLE001 - any failed beat is tried again
                    log.warning("build %s: heartbeat failed (%s); trying again", build_id, type(exc).__name__)
                    connection.close()
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"heartbeat-{build_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=interval + 5)


def finish_failed(build: Build, *, attempt: int | None, code: str, message: str, details: list[Any]) -> bool:
    """Mark the build failed (only if it is still ours and not final); audit the failed publish."""
    query = Build.objects.filter(pk=build.pk).exclude(status__in=Build.FINAL)
    if attempt is not None:
        query = query.filter(attempts=attempt)
    message, details = nul_escaped(message), nul_escaped(details)
    changed = query.update(
        status=Build.Status.FAILED,
        error_code=code,
        error_message=message,
        error_details=details,
        finished_at=timezone.now(),
    )
    if changed:
        build.status, build.error_code, build.error_message, build.error_details = (
            Build.Status.FAILED,
            code,
            message,
            details,
        )
        audit(
            action=AuditEvent.Action.PUBLISH_FAILED,
            actor=build_actor(build, check=False),
            extension=build.name,
            version=build.version_text,
            details={"build": str(build.pk), "code": code},
        )
        discard_upload(build)
    return bool(changed)


def mark_succeeded(*, build: Build, attempt: int, version_id: int) -> bool:
    """Inside the commit transaction: the build becomes succeeded only if this attempt owns it."""
    changed = Build.objects.filter(pk=build.pk, attempts=attempt, status=Build.Status.RUNNING).update(
        status=Build.Status.SUCCEEDED, version_id=version_id, finished_at=timezone.now(), error_code=""
    )
    return changed == 1


def discard_upload(build: Build) -> None:
    key = build.upload_key or Build.objects.filter(pk=build.pk).values_list("upload_key", flat=True).first()
    if not key:
        return
    try:
        storage.delete(key)
    except StorageUnavailable:
        log.warning("build %s: could not remove the staged upload; the sweeper will", build.pk)


def build_actor(build: Build, *, check: bool = True) -> Actor:
    """The publisher, as of now: with ``check``, a token revoked or expired while the build waited
    no longer counts."""
    token = ApiToken.objects.filter(pk=build.token_id).first() if build.token_id else None
    if check:
        sent_with_token = bool(build.token_id or build.token_prefix)
        if sent_with_token and (
            token is None
            or token.revoked_at is not None
            or (token.expires_at is not None and token.expires_at <= timezone.now())
        ):
            raise Unauthenticated(
                "the token this publish was sent with was deleted, revoked or expired before the build ran"
            )
        if build.submitted_by is None or not build.submitted_by.is_active:
            raise Unauthenticated("the account this publish was sent by was deactivated before the build ran")
    return Actor(user=build.submitted_by, token=token, address=build.address)


def build_reap_stale() -> dict[str, int]:
    """Builds whose worker died: running with a stale heartbeat are re-queued (or failed after
    MAX_ATTEMPTS); queued ones whose message was lost are enqueued again. Claims are conditional,
    so a duplicate message is harmless.

    In embedded mode (tasks in-process) the worker was a web process: a running build whose
    heartbeat stopped was cut short by that process dying, and there is no one to retry it on, so
    it is failed with a clear reason."""

    close_old_connections()
    now = timezone.now()
    if settings.CELERY_TASK_ALWAYS_EAGER:
        failed = 0
        for build in Build.objects.filter(_stale_running(now)):
            failed += finish_failed(
                build,
                attempt=build.attempts,
                code="internal_error",
                message=f"the registry process running this build stopped; publish it again (build {build.pk})",
                details=[],
            )
        cutoff = now - timedelta(seconds=settings.REGISTRY_BUILD_STALE_SECONDS)
        for build in Build.objects.filter(status=Build.Status.QUEUED, created_at__lt=cutoff):
            failed += finish_failed(
                build,
                attempt=build.attempts,
                code="internal_error",
                message=f"the registry process stopped before this build could start; publish it again "
                f"(build {build.pk})",
                details=[],
            )
        return {"requeued": 0, "failed": failed}
    stale = now - timedelta(seconds=settings.REGISTRY_BUILD_STALE_SECONDS)
    requeued = failed = 0
    sent: set[object] = set()
    for build in Build.objects.filter(_stale_running(now)):
        if build.attempts >= MAX_ATTEMPTS:
            failed += _fail_interrupted(build)
            continue
        if Build.objects.filter(pk=build.pk, attempts=build.attempts, status=Build.Status.RUNNING).update(
            status=Build.Status.QUEUED
        ):
            requeued += 1
            sent.add(build.pk)
            queue.enqueue(str(build.pk))
    # Queued builds whose message was lost: none sent since the stale cut-off (one message each,
    # so a backlog does not pile up duplicates).
    lost = (
        Build.objects.filter(status=Build.Status.QUEUED, created_at__lt=stale)
        .filter(Q(enqueued_at__isnull=True) | Q(enqueued_at__lt=stale))
        .exclude(pk__in=sent)
    )
    for build in lost:
        queue.enqueue(str(build.pk))
        requeued += 1
    if requeued or failed:
        log.warning("stale builds: %d re-queued, %d failed", requeued, failed)
    return {"requeued": requeued, "failed": failed}
