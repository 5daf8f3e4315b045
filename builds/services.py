"""The build lifecycle: submit (stage the upload, enqueue after commit), claim with a conditional
UPDATE, log each step, finish in an explicit final state, and notice builds whose worker died."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import Q
from django.utils import timezone

from builds.models import Build
from registry import storage
from registry.errors import RegistryError, StorageUnavailable, Unauthenticated
from registry.models import ApiToken, AuditEvent
from registry.services import audit
from registry.tokens import Actor

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
_MAX_LOG_MESSAGE = 4000


def _now_iso() -> str:
    return timezone.now().isoformat(timespec="milliseconds")


def build_submit(*, actor: Actor, kind: str, upload: Any, filename: str) -> Build:
    """Record a build for an upload (already streamed to a local temporary file and hashed), stage
    the upload where any worker can read it, and enqueue the pipeline after the commit."""
    build = Build.objects.create(
        kind=kind,
        submitted_by=actor.user,
        token=actor.token,
        token_prefix=actor.token.prefix if actor.token is not None else "",
        address=actor.address,
        filename=filename[:255],
        upload_sha256=getattr(upload, "sha256", ""),
        upload_size=upload.size,
        log=[
            {
                "step": "upload",
                "status": "passed",
                "seconds": 0.0,
                "message": f"received {upload.size} bytes, sha256 {getattr(upload, 'sha256', '')}",
                "at": _now_iso(),
            }
        ],
    )
    key = storage.upload_key(str(build.id))
    try:
        upload.seek(0)
        storage.put(key, upload)
    except StorageUnavailable as exc:
        _finish_failed(build, attempt=None, code=exc.code, message=exc.message, details=[])
        raise
    Build.objects.filter(pk=build.pk).update(upload_key=key)
    transaction.on_commit(lambda: _enqueue(str(build.pk)))
    return build


def _enqueue(build_id: str) -> None:
    """Send the build to the workers. If the broker cannot take it now, the build stays queued
    (its upload is staged) and the reaper sends it again once the broker answers."""
    from builds.tasks import run_build

    if settings.CELERY_TASK_ALWAYS_EAGER:
        run_build.delay(build_id)  # in-process: errors are the pipeline's own, recorded on the build
        return
    try:
        run_build.delay(build_id)
    except Exception:  # kombu raises many kinds; all mean "not sent now"
        log.warning("build %s: the task queue is unavailable; it stays queued for the reaper", build_id, exc_info=True)
        return
    Build.objects.filter(pk=build_id).update(enqueued_at=timezone.now())


def _clean_text(text: str) -> str:
    """Text fit for a database column: no NUL characters (PostgreSQL refuses them)."""
    return text.replace("\x00", "\\0")


def _clean_json(value: Any) -> Any:
    if isinstance(value, str):
        return _clean_text(value)
    if isinstance(value, list):
        return [_clean_json(item) for item in value]
    if isinstance(value, dict):
        return {_clean_text(str(key)): _clean_json(item) for key, item in value.items()}
    return value


def _stale_running(now: datetime) -> Q:
    """Running builds whose worker stopped beating (or never beat) before the stale cut-off."""
    stale = now - timedelta(seconds=settings.REGISTRY_BUILD_STALE_SECONDS)
    return Q(status=Build.Status.RUNNING) & (
        Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True, started_at__lt=stale)
    )


def _fail_interrupted(build: Build) -> bool:
    """Fail a build whose workers kept stopping: it has used up its attempts."""
    return _finish_failed(
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


class StepLog:
    """Appends timed steps to a build's log; every write is conditional on owning the build."""

    def __init__(self, build: Build, attempt: int) -> None:
        self.build = build
        self.attempt = attempt

    def add(self, step: str, status: str, message: str = "", seconds: float = 0.0) -> None:
        message = _clean_text(message)
        if len(message) > _MAX_LOG_MESSAGE:
            message = message[:_MAX_LOG_MESSAGE] + " [...]"
        entry = {
            "step": step,
            "status": status,
            "seconds": round(seconds, 4),
            "message": message,
            "at": _now_iso(),
        }
        self.build.log = [*self.build.log, entry]
        Build.objects.filter(pk=self.build.pk, attempts=self.attempt).update(log=self.build.log)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[dict[str, str]]:
        """Time a step; the body may set ``note["message"]``. A raised error marks the step failed."""
        note: dict[str, str] = {"message": ""}
        start = time.perf_counter()
        try:
            yield note
        except RegistryError as exc:
            self.add(name, "failed", exc.message, time.perf_counter() - start)
            raise
        except Exception as exc:
            from extensions.errors import ExtensionError

            message = str(exc) if isinstance(exc, ExtensionError) else "error on the registry's side"
            self.add(name, "failed", message, time.perf_counter() - start)
            raise
        self.add(name, "passed", note["message"], time.perf_counter() - start)


@contextlib.contextmanager
def heartbeat(build_id: str, attempt: int) -> Iterator[None]:
    """While a worker runs a build, refresh its heartbeat so that a build whose worker died is
    noticed. In-process (eager) runs need none: the request is the worker."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        yield
        return
    stop = threading.Event()
    interval = max(1.0, settings.REGISTRY_BUILD_HEARTBEAT_SECONDS)

    def beat() -> None:
        try:
            while not stop.wait(interval):
                Build.objects.filter(pk=build_id, attempts=attempt, status=Build.Status.RUNNING).update(
                    heartbeat_at=timezone.now()
                )
        except Exception:
            log.warning("build %s: heartbeat failed", build_id, exc_info=True)
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"heartbeat-{build_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=interval + 5)


def _finish_failed(build: Build, *, attempt: int | None, code: str, message: str, details: list[Any]) -> bool:
    """Mark the build failed (only if it is still ours and not final); audit the failed publish."""
    query = Build.objects.filter(pk=build.pk).exclude(status__in=Build.FINAL)
    if attempt is not None:
        query = query.filter(attempts=attempt)
    message, details = _clean_text(message), _clean_json(details)
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
            actor=_actor(build, check=False),
            extension=build.name,
            version=build.version_text,
            details={"build": str(build.pk), "code": code},
        )
        _discard_upload(build)
    return bool(changed)


def _discard_upload(build: Build) -> None:
    key = build.upload_key or Build.objects.filter(pk=build.pk).values_list("upload_key", flat=True).first()
    if not key:
        return
    try:
        storage.delete(key)
    except StorageUnavailable:
        log.warning("build %s: could not remove the staged upload; the sweeper will", build.pk)


def _actor(build: Build, *, check: bool = True) -> Actor:
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


def build_run(build_id: str) -> None:
    """Run the pipeline for a build, if it can be claimed. Safe to call twice (idempotent)."""
    from builds import pipeline

    attempt = build_claim(build_id)
    if attempt is None:
        log.info("build %s: nothing to do (final, or claimed by another worker)", build_id)
        return
    build = Build.objects.select_related("submitted_by").get(pk=build_id)
    steps = StepLog(build, attempt)
    if attempt > 1:
        steps.add("retry", "passed", f"attempt {attempt}: the previous worker stopped before finishing")
    with heartbeat(build_id, attempt):
        try:
            pipeline.run(build=build, attempt=attempt, actor=_actor(build), steps=steps)
        except RegistryError as exc:
            _finish_failed(build, attempt=attempt, code=exc.code, message=exc.message, details=exc.details)
        except Exception as exc:
            from extensions.errors import ExtensionError

            if isinstance(exc, ExtensionError):
                _finish_failed(build, attempt=attempt, code=exc.code, message=str(exc), details=exc.details_list())
            else:
                log.exception("build %s failed on the registry's side", build_id)
                _finish_failed(
                    build,
                    attempt=attempt,
                    code="internal_error",
                    message=f"the build failed because of an error on the registry's side; "
                    f"it has been logged (build {build_id})",
                    details=[{"build": str(build_id)}],
                )


def build_mark_succeeded(*, build: Build, attempt: int, version_id: int) -> bool:
    """Inside the commit transaction: the build becomes succeeded only if this attempt owns it."""
    changed = Build.objects.filter(pk=build.pk, attempts=attempt, status=Build.Status.RUNNING).update(
        status=Build.Status.SUCCEEDED, version_id=version_id, finished_at=timezone.now(), error_code=""
    )
    return changed == 1


def build_reap_stale() -> dict[str, int]:
    """Builds whose worker died: running with a stale heartbeat are re-queued (or failed after
    MAX_ATTEMPTS); queued ones whose message was lost are enqueued again. Claims are conditional,
    so a duplicate message is harmless.

    In embedded mode (tasks in-process) there is no heartbeat and no one to retry: a build still
    running longer than any build may run was cut short by its process stopping, and is failed."""

    close_old_connections()
    now = timezone.now()
    if settings.CELERY_TASK_ALWAYS_EAGER:
        limit = now - timedelta(seconds=settings.REGISTRY_BUILD_TIME_LIMIT + settings.REGISTRY_BUILD_STALE_SECONDS)
        failed = 0
        for build in Build.objects.filter(status=Build.Status.RUNNING, started_at__lt=limit):
            failed += _finish_failed(
                build,
                attempt=build.attempts,
                code="internal_error",
                message=f"the registry stopped while this build was running; publish it again (build {build.pk})",
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
            _enqueue(str(build.pk))
    # Queued builds whose message was lost: none sent since the stale cut-off (one message each,
    # so a backlog does not pile up duplicates).
    lost = (
        Build.objects.filter(status=Build.Status.QUEUED, created_at__lt=stale)
        .filter(Q(enqueued_at__isnull=True) | Q(enqueued_at__lt=stale))
        .exclude(pk__in=sent)
    )
    for build in lost:
        _enqueue(str(build.pk))
        requeued += 1
    if requeued or failed:
        log.warning("stale builds: %d re-queued, %d failed", requeued, failed)
    return {"requeued": requeued, "failed": failed}
