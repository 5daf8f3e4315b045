"""Reliability: races, storage and database failures, and dead workers, with the real components
(PostgreSQL, moto's S3 server, Redis and Celery worker processes, gunicorn)."""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from django.db import connection
from django.test import Client

from builds.lifecycle import build_reap_stale
from builds.models import Build
from registry import storage
from registry.models import AuditEvent, Extension, Version
from tests.live_registry import LiveRegistry

if TYPE_CHECKING:
    from tests.services import CeleryWorker, MotoServer, S3Bucket

pytest_plugins = ["tests.factories"]


def _package(tmp_path: Path, name: str, version: str, **kw: Any) -> Path:
    from tests.factories import package

    return package(tmp_path, name, version, **kw)


# --- 10 concurrent publishes of one name@version, on PostgreSQL --------------------------------------


@pytest.mark.postgres
def test_ten_concurrent_publishes_of_one_version_give_one_version_and_one_object(
    tmp_path: Path, postgres_server: Any
) -> None:
    import psycopg

    database = postgres_server.create_database("race")
    registry = LiveRegistry(tmp_path / "registry", database_url=database)
    registry.start(workers=4, threads=4)
    try:
        token = registry.createtoken("alice")
        data = _package(tmp_path, "racer", "1.0.0").read_bytes()
        barrier = threading.Barrier(10)
        results: list[httpx.Response] = []
        lock = threading.Lock()

        def publish() -> None:
            with httpx.Client(timeout=120) as http:
                barrier.wait()
                response = http.post(
                    f"{registry.url}/api/v1/extensions/",
                    files={"file": ("racer-1.0.0.tar.gz", data, "application/gzip")},
                    headers={"Authorization": f"Bearer {token}"},
                )
            with lock:
                results.append(response)

        threads = [threading.Thread(target=publish) for _ in range(10)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(180)
    finally:
        registry.stop()

    # Every publish answers 202 with its build (SPEC 3.2); in embedded mode each build has run.
    assert [r.status_code for r in results] == [202] * 10, [r.text[:300] for r in results]
    builds = [r.json()["data"] for r in results]
    assert sorted(b["status"] for b in builds) == ["failed"] * 9 + ["succeeded"], builds
    assert {b["error"]["code"] for b in builds if b["status"] == "failed"} == {"version_exists"}
    with psycopg.connect(database) as conn:
        versions = conn.execute(
            "SELECT v.sha256 FROM registry_version v JOIN registry_extension e ON e.id = v.extension_id "
            "WHERE e.name = 'racer'"
        ).fetchall()
        builds = conn.execute("SELECT status, error_code FROM builds_build").fetchall()
    assert versions == [(hashlib.sha256(data).hexdigest(),)]
    assert sorted(builds) == [("failed", "version_exists")] * 9 + [("succeeded", "")]
    objects = [p for p in (registry.data_dir / "packages" / "sha256").rglob("*") if p.is_file()]
    assert [p.name for p in objects] == [f"{hashlib.sha256(data).hexdigest()}.tar.gz"]
    assert hashlib.sha256(objects[0].read_bytes()).hexdigest() == versions[0][0]
    assert not list((registry.data_dir / "packages").rglob(".incoming-*"))


# --- object storage down during publish (S3 through moto's server) -----------------------------------


@pytest.mark.s3
def test_storage_down_during_publish_is_503_with_no_row_and_the_same_publish_succeeds_after_recovery(
    client: Client, token: str, tmp_path: Path, s3_storage: S3Bucket, moto_server: MotoServer
) -> None:
    from tests.factories import publish

    path = _package(tmp_path, "etcd", "3.5.9")
    moto_server.stop()
    try:
        response = publish(client, token, path)
    finally:
        moto_server.start()
    assert response.status_code == 503
    body = response.json()
    assert body["error"]["code"] == "storage_unavailable"
    build = Build.objects.get()
    assert (build.status, build.error_code) == (Build.Status.FAILED, "storage_unavailable")
    assert not Version.objects.exists() and not Extension.objects.exists()
    assert s3_storage.client.list_objects_v2(Bucket=s3_storage.name).get("KeyCount", 0) == 0

    again = publish(client, token, path)
    assert again.status_code == 202, again.content
    assert again.json()["data"]["status"] == "succeeded"
    version = Version.objects.get(extension__name="etcd")
    stored = s3_storage.client.get_object(Bucket=s3_storage.name, Key=f"packages/{version.storage_key}")["Body"].read()
    assert hashlib.sha256(stored).hexdigest() == version.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.s3
def test_storage_going_down_between_upload_and_store_fails_the_build_and_leaves_nothing(
    client: Client, token: str, tmp_path: Path, s3_storage: S3Bucket, moto_server: MotoServer, monkeypatch: Any
) -> None:
    """The upload is staged, then storage goes down before the package is stored."""
    from builds import pipeline
    from tests.factories import publish

    real_put = storage.put_package

    def put_while_down(*args: Any, **kwargs: Any) -> str:
        moto_server.stop()
        try:
            return real_put(*args, **kwargs)
        finally:
            moto_server.start()

    monkeypatch.setattr(pipeline.storage, "put_package", put_while_down)
    response = publish(client, token, _package(tmp_path, "etcd", "3.5.9"))
    assert response.status_code == 202
    assert response.json()["data"]["error"]["code"] == "storage_unavailable"
    build = Build.objects.get()
    assert build.status == Build.Status.FAILED and build.log[-1]["step"] == "store"
    assert not Version.objects.exists()
    keys = [o["Key"] for o in s3_storage.client.list_objects_v2(Bucket=s3_storage.name).get("Contents", [])]
    assert keys == []  # neither the package nor the staged upload


# --- package files storage unusable -------------------------------------------------------------------


def test_healthz_says_so_when_the_packages_directory_cannot_be_used(
    client: Client, db: None, private_storage: Path
) -> None:
    assert client.get("/healthz").status_code == 200
    private_storage.rmdir()
    private_storage.write_text("not a directory")  # a failed mount, an operator's mistake
    try:
        health = client.get("/healthz")
        assert health.status_code == 503
        assert health.json()["data"] == {"status": "unhealthy", "checks": {"database": "ok", "storage": "unavailable"}}
    finally:
        private_storage.unlink()
    # Not there yet (a new registry before its first publish): made, as the first write would.
    assert client.get("/healthz").status_code == 200
    assert private_storage.is_dir()


# --- the database commit fails after the object was stored --------------------------------------------


def _fail_version_inserts(name: str) -> None:
    """A real database failure at commit: a trigger refuses inserting a version of `name`."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "CREATE FUNCTION refuse_version() RETURNS trigger AS $$ BEGIN "
                "IF (SELECT name FROM registry_extension WHERE id = NEW.extension_id) = %s "
                "THEN RAISE EXCEPTION 'disk full (simulated)'; END IF; RETURN NEW; END; $$ LANGUAGE plpgsql",
                [name],
            )
            cursor.execute(
                "CREATE TRIGGER refuse_version BEFORE INSERT ON registry_version "
                "FOR EACH ROW EXECUTE FUNCTION refuse_version()"
            )
        else:
            assert name.replace("-", "").isalnum()  # spliced into the trigger's SQL text below
            trigger = (
                "CREATE TRIGGER refuse_version BEFORE INSERT ON registry_version "  # noqa: S608 - name checked
                f"WHEN (SELECT name FROM registry_extension WHERE id = NEW.extension_id) = '{name}' "
                "BEGIN SELECT RAISE(ABORT, 'disk full (simulated)'); END"
            )
            cursor.execute(trigger)


def test_a_failed_database_commit_removes_the_stored_object(
    client: Client, token: str, tmp_path: Path, private_storage: Path
) -> None:
    from tests.factories import publish

    _fail_version_inserts("doomed")
    path = _package(tmp_path, "doomed", "1.0.0")
    response = publish(client, token, path)

    assert response.status_code == 202
    error = response.json()["data"]["error"]
    assert error["code"] == "internal_error"
    assert "error on the registry's side" in error["message"]
    build = Build.objects.get()
    assert (build.status, build.log[-1]["step"], build.log[-1]["status"]) == (Build.Status.FAILED, "commit", "failed")
    assert [s["step"] for s in build.log if s["status"] == "passed"][-1] == "store"  # it was stored first
    assert not Version.objects.exists() and not Extension.objects.exists()
    assert [k for k, _ in storage.list_keys(storage.PACKAGES_PREFIX)] == []
    assert [k for k, _ in storage.list_keys(storage.UPLOADS_PREFIX)] == []
    assert AuditEvent.objects.filter(action=AuditEvent.Action.PUBLISH).count() == 0

    other = publish(client, token, _package(tmp_path / "other", "healthy", "1.0.0"))
    assert other.status_code == 202  # the registry is fine afterwards


# --- a worker killed mid-build ------------------------------------------------------------------------


def _slow_package(tmp_path: Path) -> Path:
    """A package whose content checks take a few seconds: many KCL packages, each compiled apart."""
    extra = {
        f"kcl/part{i:02d}/schema.k": (
            f"schema Node{i}:\n    name: str\n    cpus: int = 2\n"
            '    check:\n        cpus >= 1, "cpus must be at least 1"\n\n'
            f'node{i} = Node{i} {{ name = "n{i}" }}\n'
        )
        for i in range(40)
    }
    return _package(tmp_path, "slowpoke", "1.0.0", extra_files=extra)


def _wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.mark.redis
@pytest.mark.slow
def test_a_worker_killed_mid_build_is_noticed_and_the_build_is_retried_to_success(
    live_db_url: str,
    celery_worker_factory: Any,
    settings: Any,
    tmp_path: Path,
    kcl: None,
) -> None:
    from tests.factories import make_token, make_user, publish

    # The worker shares this process's REGISTRY_DATA_DIR, so both use REGISTRY_DATA_DIR/packages.
    fast = {"REGISTRY_BUILD_HEARTBEAT_SECONDS": "1", "REGISTRY_BUILD_STALE_SECONDS": "3"}
    settings.REGISTRY_BUILD_STALE_SECONDS = 3
    first: CeleryWorker = celery_worker_factory(env=fast)
    token = make_token(make_user("alice"))
    client = Client()
    response = publish(client, token, _slow_package(tmp_path))
    assert response.status_code == 202
    build_id = response.json()["data"]["id"]

    def running_checks() -> bool:
        build = Build.objects.get(pk=build_id)
        return build.status == Build.Status.RUNNING and any(s["step"] == "validate" for s in build.log)

    _wait_for(running_checks, 60, "the build to reach its content checks on the first worker")
    assert first.kill() == -9
    assert Build.objects.get(pk=build_id).status == Build.Status.RUNNING  # the dead worker's claim
    second: CeleryWorker = celery_worker_factory(env=fast)
    _wait_for(
        lambda: build_reap_stale()["requeued"] >= 1 or Build.objects.get(pk=build_id).status != "running",
        30,
        "the reaper to notice the stale build",
    )
    _wait_for(lambda: Build.objects.get(pk=build_id).is_final, 120, "the retried build to finish")

    build = Build.objects.get(pk=build_id)
    assert build.status == Build.Status.SUCCEEDED, (build.error_code, build.error_message, second.output()[-3000:])
    assert build.attempts == 2
    assert any(s["step"] == "retry" for s in build.log)
    version = Version.objects.get(extension__name="slowpoke")
    assert storage.exists(version.storage_key) and storage.size(version.storage_key) == version.size
    # The worker removes the staged upload just after its commit, so the build can read as
    # succeeded a moment before the upload is gone; a leak would still time out here.
    _wait_for(lambda: not storage.exists(storage.upload_key(build_id)), 10, "the staged upload to be removed")


# --- end to end with Redis, a real worker and S3 -------------------------------------------------------


@pytest.mark.redis
@pytest.mark.s3
def test_publish_builds_in_a_worker_and_downloads_from_s3(
    live_server: Any, celery_worker_factory: Any, s3_storage: S3Bucket, tmp_path: Path
) -> None:
    from tests.factories import make_token, make_user

    worker: CeleryWorker = celery_worker_factory()
    token = make_token(make_user("alice"))
    data = _package(tmp_path, "etcd", "3.5.9").read_bytes()
    with httpx.Client(base_url=live_server.url, timeout=60) as http:
        response = http.post(
            "/api/v1/extensions/",
            files={"file": ("etcd-3.5.9.tar.gz", data, "application/gzip")},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 202, response.text
        queued = response.json()["data"]
        # The web process only staged it; a fast worker may have claimed it before the answer.
        assert queued["status"] in ("queued", "running"), queued
        deadline = time.monotonic() + 60
        while True:
            build = http.get(response.headers["Location"]).json()["data"]
            if build["status"] in ("succeeded", "failed") or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert build["status"] == "succeeded", (build, worker.output()[-3000:])
        assert [s["step"] for s in build["log"]][-1] == "commit"
        download = http.get("/api/v1/extensions/etcd/versions/3.5.9/download")
        assert download.status_code == 302
        assert download.headers["X-Checksum-Sha256"] == hashlib.sha256(data).hexdigest()
        package = httpx.get(download.headers["Location"], timeout=30)
    assert package.status_code == 200
    assert package.content == data
