"""The build lifecycle below the API (builds.services, builds.sweeper): conditional claims, idempotent
runs, the reaper of builds whose worker died, the storage sweeper, and package_discard."""

from __future__ import annotations

import hashlib
import io
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest import mock

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from builds import lifecycle, pipeline, services, tasks
from builds.models import Build
from builds.steplog import StepLog
from builds.sweeper import storage_sweep
from registry import services as catalog
from registry import storage
from registry.models import AuditEvent, Extension, Version
from registry.tokens import Actor

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from tests.factories import Publisher

pytest_plugins = ["tests.factories"]  # the user, token and publisher fixtures


# Package storage private to each test (tests/conftest.py), so what it leaves can be listed exactly.
pytestmark = pytest.mark.usefixtures("private_storage")


def keys(prefix: str) -> set[str]:
    return {key for key, _ in storage.list_keys(prefix)}


def submit(user: AbstractBaseUser, path: Path) -> Build:
    """A build submitted as the API would, left queued (its message is dropped): the test decides
    who runs it and when."""
    data = path.read_bytes()
    upload = SimpleUploadedFile(path.name, data, content_type="application/gzip")
    upload.sha256 = hashlib.sha256(data).hexdigest()  # type: ignore[attr-defined]
    with mock.patch.object(tasks.run_build, "delay"):
        build = services.build_submit(
            actor=Actor(user=user, address="127.0.0.1"), kind=Build.Kind.PACKAGE, upload=upload, filename=path.name
        )
    build.refresh_from_db()
    assert build.status == Build.Status.QUEUED
    return build


def go_stale(build: Build, settings: Any, *, heartbeat: bool = True) -> None:
    """Make a running build look as if its worker stopped beating long ago."""
    long_ago = timezone.now() - timedelta(seconds=settings.REGISTRY_BUILD_STALE_SECONDS + 5)
    if heartbeat:
        Build.objects.filter(pk=build.pk).update(heartbeat_at=long_ago, started_at=long_ago)
    else:
        Build.objects.filter(pk=build.pk).update(heartbeat_at=None, started_at=long_ago)


@pytest.fixture
def queued(user: AbstractBaseUser, tmp_path: Path) -> Build:
    from tests.factories import package

    return submit(user, package(tmp_path, "etcd", "3.5.9"))


# --- claims -----------------------------------------------------------------------------------------


def test_a_queued_build_is_claimed_once(queued: Build) -> None:
    assert lifecycle.build_claim(str(queued.pk)) == 1
    queued.refresh_from_db()
    assert (queued.status, queued.attempts) == (Build.Status.RUNNING, 1)
    assert queued.started_at is not None and queued.heartbeat_at is not None

    assert lifecycle.build_claim(str(queued.pk)) is None  # running, and its worker is alive
    queued.refresh_from_db()
    assert (queued.status, queued.attempts) == (Build.Status.RUNNING, 1)


@pytest.mark.parametrize("heartbeat", [True, False], ids=["stale-heartbeat", "never-beat"])
def test_a_stale_running_build_can_be_reclaimed_as_the_next_attempt(
    queued: Build, settings: Any, heartbeat: bool
) -> None:
    assert lifecycle.build_claim(str(queued.pk)) == 1
    go_stale(queued, settings, heartbeat=heartbeat)

    assert lifecycle.build_claim(str(queued.pk)) == 2
    queued.refresh_from_db()
    assert (queued.status, queued.attempts) == (Build.Status.RUNNING, 2)
    assert timezone.now() - queued.heartbeat_at < timedelta(seconds=5)  # type: ignore[operator]
    assert lifecycle.build_claim(str(queued.pk)) is None  # the new owner is alive


def test_a_build_just_under_the_stale_age_is_not_reclaimed(queued: Build, settings: Any) -> None:
    assert lifecycle.build_claim(str(queued.pk)) == 1
    recent = timezone.now() - timedelta(seconds=settings.REGISTRY_BUILD_STALE_SECONDS - 5)
    Build.objects.filter(pk=queued.pk).update(heartbeat_at=recent)
    assert lifecycle.build_claim(str(queued.pk)) is None


@pytest.mark.parametrize("status", [Build.Status.SUCCEEDED, Build.Status.FAILED])
def test_a_final_build_is_never_claimed(queued: Build, status: str) -> None:
    Build.objects.filter(pk=queued.pk).update(status=status)
    assert lifecycle.build_claim(str(queued.pk)) is None
    queued.refresh_from_db()
    assert (queued.status, queued.attempts) == (status, 0)


def test_an_unknown_build_is_not_claimed(db: None) -> None:
    assert lifecycle.build_claim("00000000-0000-0000-0000-000000000000") is None


def test_a_build_interrupted_too_often_is_failed_instead_of_claimed(queued: Build, settings: Any) -> None:
    Build.objects.filter(pk=queued.pk).update(status=Build.Status.RUNNING, attempts=lifecycle.MAX_ATTEMPTS)
    go_stale(queued, settings)

    assert lifecycle.build_claim(str(queued.pk)) is None
    queued.refresh_from_db()
    assert queued.status == Build.Status.FAILED
    assert queued.error_code == "internal_error"
    assert f"interrupted {lifecycle.MAX_ATTEMPTS} times" in queued.error_message
    assert keys(storage.UPLOADS_PREFIX) == set()


def test_a_duplicate_message_does_not_fail_a_live_last_attempt(queued: Build) -> None:
    """The last allowed attempt is running and beating: a duplicate message (a redelivery, the
    reaper) must leave it alone, not fail it as interrupted too often."""
    now = timezone.now()
    Build.objects.filter(pk=queued.pk).update(
        status=Build.Status.RUNNING, attempts=lifecycle.MAX_ATTEMPTS, started_at=now, heartbeat_at=now
    )

    assert lifecycle.build_claim(str(queued.pk)) is None
    services.build_run(str(queued.pk))

    queued.refresh_from_db()
    assert (queued.status, queued.attempts, queued.error_code) == (Build.Status.RUNNING, lifecycle.MAX_ATTEMPTS, "")
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.PUBLISH_FAILED).exists()


def test_a_worker_whose_build_was_taken_over_cannot_commit(
    queued: Build, user: AbstractBaseUser, settings: Any
) -> None:
    """Attempt 1 was thought dead and attempt 2 took over: attempt 1 finishing late commits nothing,
    writes nothing to the log, and leaves no object behind."""
    assert lifecycle.build_claim(str(queued.pk)) == 1
    go_stale(queued, settings)
    assert lifecycle.build_claim(str(queued.pk)) == 2
    old = Build.objects.get(pk=queued.pk)
    log_before = list(old.log)

    with pytest.raises(pipeline._LostClaim):
        pipeline.run(build=old, attempt=1, actor=Actor(user=user), steps=StepLog(old, 1))

    queued.refresh_from_db()
    assert (queued.status, queued.attempts, queued.version_id) == (Build.Status.RUNNING, 2, None)
    assert queued.log == log_before
    assert not Version.objects.exists() and not Extension.objects.exists()
    assert keys(storage.PACKAGES_PREFIX) == set()


# --- runs -------------------------------------------------------------------------------------------


def test_build_run_publishes_a_queued_build(queued: Build) -> None:
    services.build_run(str(queued.pk))
    queued.refresh_from_db()
    assert queued.status == Build.Status.SUCCEEDED
    assert queued.version == Version.objects.get(extension__name="etcd", version="3.5.9")
    assert keys(storage.UPLOADS_PREFIX) == set()


@pytest.mark.parametrize("outcome", ["succeeded", "failed"])
def test_build_run_on_a_finished_build_changes_nothing(user: AbstractBaseUser, tmp_path: Path, outcome: str) -> None:
    from tests.factories import package

    deps = ["missing-dependency"] if outcome == "failed" else []
    build = submit(user, package(tmp_path, "etcd", "3.5.9", dependencies=deps))
    services.build_run(str(build.pk))
    build.refresh_from_db()
    assert build.status == outcome
    snapshot = Build.objects.filter(pk=build.pk).values().get()
    counts = (Version.objects.count(), AuditEvent.objects.count())
    objects = keys(storage.PACKAGES_PREFIX)

    services.build_run(str(build.pk))
    services.build_run(str(build.pk))

    assert Build.objects.filter(pk=build.pk).values().get() == snapshot
    assert (Version.objects.count(), AuditEvent.objects.count()) == counts
    assert keys(storage.PACKAGES_PREFIX) == objects


def test_a_failed_step_is_logged_with_the_authors_message(user: AbstractBaseUser, tmp_path: Path) -> None:
    from tests.factories import package

    build = submit(user, package(tmp_path, "etcd", "3.5.9", dependencies=["missing-dependency"]))
    services.build_run(str(build.pk))
    build.refresh_from_db()
    assert build.status == Build.Status.FAILED
    assert build.error_code == "unknown_dependency"
    last = build.log[-1]
    assert (last["step"], last["status"]) == ("validate", "failed")
    assert "no extension named 'missing-dependency'" in last["message"]
    assert last["message"] == build.error_message


# --- the reaper -------------------------------------------------------------------------------------
# The reaper runs in a worker and starts with close_old_connections(), which closes a connection
# that is inside a transaction: these tests run on real commits (transactional_db).
reaper = pytest.mark.django_db(transaction=True)


@pytest.fixture
def worker_mode(settings: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Tasks go to a broker (recorded here) whose worker delivers them at once, in this process."""
    settings.CELERY_TASK_ALWAYS_EAGER = False
    sent: list[str] = []

    def deliver(build_id: str) -> None:
        sent.append(build_id)
        services.build_run(build_id)

    monkeypatch.setattr(tasks.run_build, "delay", deliver)
    return sent


@reaper
def test_the_reaper_requeues_a_build_whose_worker_died_and_it_completes(
    queued: Build, settings: Any, worker_mode: list[str]
) -> None:
    assert lifecycle.build_claim(str(queued.pk)) == 1  # a worker took it, then died
    go_stale(queued, settings)

    # The re-queued build is delivered at once and runs as attempt 2.
    assert lifecycle.build_reap_stale() == {"requeued": 1, "failed": 0}
    assert worker_mode == [str(queued.pk)]

    queued.refresh_from_db()
    assert queued.status == Build.Status.SUCCEEDED
    assert queued.attempts == 2
    steps = [e["step"] for e in queued.log]
    assert steps[:3] == ["upload", "retry", "fetch"]
    assert "attempt 2" in queued.log[1]["message"]
    assert Version.objects.filter(extension__name="etcd").count() == 1


@reaper
def test_the_reaper_requeues_without_running_when_tasks_go_to_a_broker(
    queued: Build, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False
    sent: list[str] = []
    monkeypatch.setattr(tasks.run_build, "delay", lambda build_id: sent.append(build_id))
    assert lifecycle.build_claim(str(queued.pk)) == 1
    go_stale(queued, settings)

    assert lifecycle.build_reap_stale() == {"requeued": 1, "failed": 0}
    queued.refresh_from_db()
    assert (queued.status, queued.attempts) == (Build.Status.QUEUED, 1)
    assert sent == [str(queued.pk)]
    # The message is delivered: the next claim is attempt 2.
    assert lifecycle.build_claim(str(queued.pk)) == 2


@reaper
def test_the_reaper_sends_one_message_for_an_old_build_whose_worker_died(
    queued: Build, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build that has been running longer than the stale age was also created before it: it is
    re-queued once, not re-queued and then enqueued again as a lost queued build."""
    settings.CELERY_TASK_ALWAYS_EAGER = False
    sent: list[str] = []
    monkeypatch.setattr(tasks.run_build, "delay", lambda build_id: sent.append(build_id))
    assert lifecycle.build_claim(str(queued.pk)) == 1
    go_stale(queued, settings)
    long_ago = timezone.now() - timedelta(seconds=settings.REGISTRY_BUILD_STALE_SECONDS + 10)
    Build.objects.filter(pk=queued.pk).update(created_at=long_ago)

    assert lifecycle.build_reap_stale() == {"requeued": 1, "failed": 0}
    assert sent == [str(queued.pk)]


@reaper
def test_the_reaper_fails_a_build_that_exhausted_its_attempts(queued: Build, settings: Any) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False
    Build.objects.filter(pk=queued.pk).update(status=Build.Status.RUNNING, attempts=lifecycle.MAX_ATTEMPTS)
    go_stale(queued, settings)

    assert lifecycle.build_reap_stale() == {"requeued": 0, "failed": 1}

    queued.refresh_from_db()
    assert queued.status == Build.Status.FAILED
    assert queued.error_code == "internal_error"
    assert queued.error_message.startswith(f"the build was interrupted {lifecycle.MAX_ATTEMPTS} times")
    assert str(queued.pk) in queued.error_message
    assert queued.finished_at is not None
    event = AuditEvent.objects.get(action=AuditEvent.Action.PUBLISH_FAILED)
    assert event.details == {"build": str(queued.pk), "code": "internal_error"}
    assert keys(storage.UPLOADS_PREFIX) == set()


@reaper
def test_the_reaper_leaves_live_and_finished_builds_alone(
    queued: Build, user: AbstractBaseUser, tmp_path: Path, settings: Any
) -> None:
    from tests.factories import package

    settings.CELERY_TASK_ALWAYS_EAGER = False
    done = submit(user, package(tmp_path / "b", "redis", "7.2.4"))
    services.build_run(str(done.pk))
    assert lifecycle.build_claim(str(queued.pk)) == 1  # running, beating

    assert lifecycle.build_reap_stale() == {"requeued": 0, "failed": 0}
    queued.refresh_from_db()
    assert (queued.status, queued.attempts) == (Build.Status.RUNNING, 1)
    assert Build.objects.get(pk=done.pk).status == Build.Status.SUCCEEDED


@reaper
def test_the_reaper_enqueues_a_queued_build_whose_message_was_lost(
    queued: Build, settings: Any, worker_mode: list[str]
) -> None:
    long_ago = timezone.now() - timedelta(seconds=settings.REGISTRY_BUILD_STALE_SECONDS + 5)
    Build.objects.filter(pk=queued.pk).update(created_at=long_ago)

    assert lifecycle.build_reap_stale() == {"requeued": 1, "failed": 0}
    queued.refresh_from_db()
    assert (queued.status, queued.attempts) == (Build.Status.SUCCEEDED, 1)


@reaper
def test_a_queued_backlog_is_not_sent_again_while_its_message_is_fresh(
    queued: Build, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False
    sent: list[str] = []
    monkeypatch.setattr(tasks.run_build, "delay", lambda build_id: sent.append(build_id))
    long_ago = timezone.now() - timedelta(seconds=settings.REGISTRY_BUILD_STALE_SECONDS + 5)
    Build.objects.filter(pk=queued.pk).update(created_at=long_ago, enqueued_at=long_ago)

    assert lifecycle.build_reap_stale() == {"requeued": 1, "failed": 0}  # its message is long lost
    assert lifecycle.build_reap_stale() == {"requeued": 0, "failed": 0}  # just sent: wait for it
    assert sent == [str(queued.pk)]


@reaper
def test_in_embedded_mode_the_reaper_fails_a_build_its_process_left_running(queued: Build, settings: Any) -> None:
    """No heartbeat, no worker to retry: past the longest a build may run, it was cut short."""
    assert lifecycle.build_claim(str(queued.pk)) == 1
    assert lifecycle.build_reap_stale() == {"requeued": 0, "failed": 0}  # still within its time
    past = timezone.now() - timedelta(
        seconds=settings.REGISTRY_BUILD_TIME_LIMIT + settings.REGISTRY_BUILD_STALE_SECONDS + 5
    )
    Build.objects.filter(pk=queued.pk).update(started_at=past, heartbeat_at=past)

    assert lifecycle.build_reap_stale() == {"requeued": 0, "failed": 1}
    queued.refresh_from_db()
    assert queued.status == Build.Status.FAILED
    assert "publish it again" in queued.error_message


# --- the sweeper and package_discard ----------------------------------------------------------------


def put_object(key: str, data: bytes = b"orphan") -> None:
    storage.put(key, io.BytesIO(data))


def test_the_sweeper_removes_unreferenced_objects_and_keeps_referenced_ones(publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    kept = Version.objects.get().storage_key
    orphan = storage.package_key("ab" * 32)
    put_object(orphan)

    assert storage_sweep(grace_seconds=0) == {"packages": 1, "uploads": 0}
    assert keys(storage.PACKAGES_PREFIX) == {kept}
    assert client_download_ok(publisher)


def client_download_ok(publisher: Publisher) -> bool:
    return publisher.client.get("/api/v1/extensions/etcd/versions/3.5.9/download").status_code == 200


def test_the_sweeper_removes_the_staged_upload_of_a_finished_build_only(
    queued: Build, user: AbstractBaseUser, tmp_path: Path
) -> None:
    from tests.factories import package

    finished = submit(user, package(tmp_path / "b", "redis", "7.2.4"))
    Build.objects.filter(pk=finished.pk).update(status=Build.Status.FAILED)  # its removal failed back then
    assert keys(storage.UPLOADS_PREFIX) == {queued.upload_key, finished.upload_key}

    assert storage_sweep(grace_seconds=0) == {"packages": 0, "uploads": 1}
    assert keys(storage.UPLOADS_PREFIX) == {queued.upload_key}  # the queued build still needs its upload


def test_the_sweeper_spares_objects_younger_than_the_grace_period(db: None) -> None:
    orphan = storage.package_key("cd" * 32)
    put_object(orphan)
    put_object(storage.upload_key("00000000-0000-0000-0000-000000000000"))

    assert storage_sweep() == {"packages": 0, "uploads": 0}  # in-flight publishes are never touched
    assert storage_sweep(grace_seconds=3600) == {"packages": 0, "uploads": 0}
    assert orphan in keys(storage.PACKAGES_PREFIX)
    assert storage_sweep(grace_seconds=0) == {"packages": 1, "uploads": 1}


def test_the_sweeper_runs_on_an_empty_storage(db: None) -> None:
    assert storage_sweep(grace_seconds=0) == {"packages": 0, "uploads": 0}


def test_package_discard_keeps_an_object_a_version_references(publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    version = Version.objects.get()

    assert catalog.package_discard(sha256=version.sha256, key=version.storage_key) is False
    assert storage.exists(version.storage_key)
    assert client_download_ok(publisher)


def test_package_discard_removes_an_object_nothing_references(db: None) -> None:
    sha256 = "ef" * 32
    put_object(storage.package_key(sha256))

    assert catalog.package_discard(sha256=sha256, key=storage.package_key(sha256)) is True
    assert keys(storage.PACKAGES_PREFIX) == set()


def test_a_package_removed_between_store_and_commit_is_stored_again(
    queued: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A concurrent failed publish of the same bytes removed the object after this build stored it:
    the commit stores it again, so no version is ever committed without its package."""
    original = catalog.version_create

    def version_create(**kwargs: Any) -> Version:
        storage.delete(kwargs["storage_key"])  # the other publish's package_discard got there first
        return original(**kwargs)

    monkeypatch.setattr(catalog, "version_create", version_create)
    services.build_run(str(queued.pk))

    queued.refresh_from_db()
    assert queued.status == Build.Status.SUCCEEDED
    version = Version.objects.get()
    with storage.open_file(version.storage_key) as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == version.sha256


def test_a_token_revoked_while_the_build_waited_fails_it_unauthenticated(
    user: AbstractBaseUser, tmp_path: Path
) -> None:
    from registry.models import ApiToken
    from tests.factories import make_token, package

    make_token(user)
    token = ApiToken.objects.get(user=user)
    path = package(tmp_path, "late-token", "1.0.0")
    data = path.read_bytes()
    upload = SimpleUploadedFile(path.name, data, content_type="application/gzip")
    upload.sha256 = hashlib.sha256(data).hexdigest()  # type: ignore[attr-defined]
    with mock.patch.object(tasks.run_build, "delay"):
        build = services.build_submit(
            actor=Actor(user=user, token=token, address="127.0.0.1"),
            kind=Build.Kind.PACKAGE,
            upload=upload,
            filename=path.name,
        )
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    services.build_run(str(build.pk))
    build.refresh_from_db()
    assert build.status == Build.Status.FAILED
    assert build.error_code == "unauthenticated"
    assert "revoked or expired" in build.error_message
    assert not Version.objects.filter(extension__name="late-token").exists()
    assert keys(storage.PACKAGES_PREFIX) == set()


@reaper
def test_the_sweeper_removes_leftover_temporary_files_and_old_lock_rows(private_storage: Path) -> None:
    import os

    from registry.models import NameLock, PackageLock

    put_object(f"{storage.PACKAGES_PREFIX}/ab/.incoming-x1y2z3")
    long_ago = timezone.now() - timedelta(days=2)
    leftover = private_storage / storage.PACKAGES_PREFIX / "ab" / ".incoming-x1y2z3"
    os.utime(leftover, (long_ago.timestamp(), long_ago.timestamp()))  # a writer that died long ago
    PackageLock.objects.create(sha256="a" * 64, touched_at=long_ago)
    NameLock.objects.create(key="etcd", touched_at=long_ago)
    NameLock.objects.create(key="fresh", touched_at=timezone.now())

    storage_sweep(grace_seconds=3600)

    assert keys(storage.PACKAGES_PREFIX) == set()
    assert not PackageLock.objects.exists()
    assert list(NameLock.objects.values_list("key", flat=True)) == ["fresh"]
