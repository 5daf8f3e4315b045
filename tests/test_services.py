"""The real-service fixtures of tests/services.py work for real."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings as django_settings
from django.core.files.base import ContentFile

from tests.services import CeleryWorker, MotoServer, PostgresServer, RedisServer, S3Bucket


def _poll(check: Any, timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return bool(check())


# --- settings --------------------------------------------------------------------------------------


def test_each_test_process_writes_into_a_private_temporary_data_dir() -> None:
    data_dir = Path(django_settings.REGISTRY_DATA_DIR)
    repo_var = Path(__file__).resolve().parent.parent / "var"
    assert data_dir.is_dir()
    assert data_dir.name.startswith("registry-test-")
    assert not data_dir.is_relative_to(repo_var)
    assert os.environ["REGISTRY_DATA_DIR"] == str(data_dir)
    packages: Any = django_settings.STORAGES["packages"]
    assert packages["OPTIONS"]["location"] == str(data_dir / "packages")


def test_passwords_are_hashed_with_the_fast_test_hasher() -> None:
    from django.contrib.auth.hashers import make_password

    assert django_settings.PASSWORD_HASHERS == ["django.contrib.auth.hashers.MD5PasswordHasher"]
    assert make_password("secret").startswith("md5$")


@pytest.mark.django_db
def test_the_suite_runs_on_the_database_the_command_line_asked_for(request: pytest.FixtureRequest) -> None:
    from django.db import connection

    expected = "postgresql" if request.config.getoption("postgres") else "sqlite"
    assert connection.vendor == expected
    name = Path(str(connection.settings_dict["NAME"])).name
    assert name.startswith("test_registry" if expected == "postgresql" else "test-registry.sqlite3")
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


# --- PostgreSQL ------------------------------------------------------------------------------------


@pytest.mark.postgres
def test_postgres_url_answers_select_version(postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(postgres_url) as conn:
        row = conn.execute("SELECT version()").fetchone()
    assert row is not None
    assert row[0].startswith("PostgreSQL ")


@pytest.mark.postgres
def test_create_database_gives_an_empty_database_each_time(postgres_server: PostgresServer) -> None:
    import psycopg

    first, second = postgres_server.create_database("t"), postgres_server.create_database("t")
    assert first != second
    with psycopg.connect(first) as conn:
        conn.execute("CREATE TABLE marker (id int)")
    with psycopg.connect(second) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
    assert tables == (0,)


@pytest.mark.postgres
def test_a_postgres_marker_brings_the_server_along(request: pytest.FixtureRequest) -> None:
    assert "postgres_server" in request.fixturenames
    server = request.getfixturevalue("postgres_server")
    assert server.admin_url.startswith("postgres://postgres@127.0.0.1:")


# --- Redis and Celery ------------------------------------------------------------------------------


@pytest.mark.redis
def test_redis_answers_ping(redis_url: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        assert client.ping() is True
    finally:
        client.close()


def test_a_stopped_redis_comes_back_on_the_same_url(redis_server: RedisServer) -> None:
    import redis

    url = redis_server.url
    redis_server.stop()
    try:
        with pytest.raises(redis.ConnectionError):
            redis.Redis.from_url(url, socket_connect_timeout=1).ping()
    finally:
        redis_server.start()
    assert redis_server.url == url
    assert redis.Redis.from_url(url).ping() is True


def test_a_worker_runs_a_task_on_the_test_database_and_data_dir(celery_worker_factory: Any, live_db_url: str) -> None:
    from django.contrib.auth import get_user_model

    from registry.celery import app

    worker: CeleryWorker = celery_worker_factory(include=("tests.services",))
    assert worker.env["DATABASE_URL"] == live_db_url
    key = f"probe-{uuid.uuid4().hex[:8]}"
    sent = app.send_task("tests.services.probe", args=[key])

    written = Path(django_settings.REGISTRY_DATA_DIR) / f"probe-{key}"
    assert _poll(lambda: get_user_model().objects.filter(username=key).exists() and written.exists()), worker.output()
    assert written.read_text() == key
    assert f"tests.services.probe[{sent.id}] received" in worker.wait_for_log(sent.id)
    assert worker.ping() is True
    assert worker.stop() == 0
    assert worker.process.poll() == 0


def test_a_killed_worker_dies_at_once(celery_worker_factory: Any) -> None:
    worker: CeleryWorker = celery_worker_factory()
    assert worker.ping() is True
    assert worker.kill() == -9
    assert worker.process.poll() == -9
    assert worker.ping(timeout=0.2) is False


# --- S3 --------------------------------------------------------------------------------------------


def test_without_s3_storage_packages_are_files_in_the_data_dir() -> None:
    from django.core.files.storage import FileSystemStorage, storages

    storage = storages["packages"]
    assert isinstance(storage, FileSystemStorage)
    assert Path(storage.location) == Path(django_settings.REGISTRY_DATA_DIR) / "packages"


def test_s3_storage_stores_objects_in_its_bucket_and_presigns_downloads(s3_storage: S3Bucket) -> None:
    from django.core.files.storage import storages
    from storages.backends.s3 import S3Storage

    storage = storages["packages"]
    assert isinstance(storage, S3Storage)
    assert django_settings.REGISTRY_STORAGE == "s3"
    saved = storage.save("sha256/ab/abc.tar.gz", ContentFile(b"package bytes"))
    assert saved == "sha256/ab/abc.tar.gz"

    with storage.open(saved, "rb") as handle:
        assert handle.read() == b"package bytes"
    stored = s3_storage.client.get_object(Bucket=s3_storage.name, Key=f"{s3_storage.location}/{saved}")
    assert stored["Body"].read() == b"package bytes"
    assert stored["ContentType"] == "application/gzip"

    url = storage.url(saved)
    assert url.startswith(f"{s3_storage.endpoint_url}/{s3_storage.name}/{s3_storage.location}/{saved}?")
    assert "Signature=" in url
    response = httpx.get(url)
    assert response.status_code == 200
    assert response.content == b"package bytes"
    assert httpx.get(url.split("?", 1)[0]).status_code == 403


def test_a_stopped_moto_server_refuses_requests_until_it_is_started_again(
    s3_storage: S3Bucket, moto_server: MotoServer
) -> None:
    from botocore.exceptions import EndpointConnectionError
    from django.core.files.storage import storages

    storage = storages["packages"]
    storage.save("kept.tar.gz", ContentFile(b"kept"))
    assert storage.exists("kept.tar.gz")  # leaves a kept-alive connection open
    moto_server.stop()
    try:
        started = time.monotonic()
        with pytest.raises(EndpointConnectionError):
            storage.exists("kept.tar.gz")
        assert time.monotonic() - started < 5
        with pytest.raises(httpx.ConnectError):
            httpx.get(moto_server.url)
    finally:
        moto_server.start()
    assert storage.exists("kept.tar.gz")
    with storage.open("kept.tar.gz", "rb") as handle:
        assert handle.read() == b"kept"


@pytest.mark.s3
def test_an_s3_marker_brings_the_server_along(request: pytest.FixtureRequest) -> None:
    assert "moto_server" in request.fixturenames
    assert httpx.get(request.getfixturevalue("moto_server").url).status_code == 200


# --- together --------------------------------------------------------------------------------------


def test_live_server_a_worker_and_s3_storage_combine(
    live_server: Any, celery_worker_factory: Any, s3_storage: S3Bucket
) -> None:
    worker: CeleryWorker = celery_worker_factory()
    assert worker.env["REGISTRY_STORAGE"] == "s3"
    assert worker.env["REGISTRY_S3_BUCKET"] == s3_storage.name
    assert worker.env["REGISTRY_S3_ENDPOINT_URL"] == s3_storage.endpoint_url

    health = httpx.get(f"{live_server.url}/healthz")
    assert health.status_code == 200, health.text
    checks = health.json()["data"]["checks"]
    assert (checks["database"], checks["storage"]) == ("ok", "ok")


@pytest.mark.slow
def test_a_killed_test_process_leaves_no_live_registry_behind(tmp_path: Path) -> None:
    """Even a SIGKILL of the process that started a live gunicorn (an interrupted run, a killed
    xdist worker: no finalizer or atexit runs) stops it: it dies with its parent."""
    import signal
    import subprocess
    import sys

    from tests.services import BASE_DIR

    script = (
        "import sys, time; from pathlib import Path; from tests.live_registry import LiveRegistry\n"
        f"r = LiveRegistry(Path({str(tmp_path / 'registry')!r})); r.start(workers=1, threads=1)\n"
        "print(r.process.pid, r.port, flush=True); time.sleep(600)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(BASE_DIR)}
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=BASE_DIR, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        pid, port = (int(x) for x in parent.stdout.readline().split())
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            # (a zombie is reaped by init once the master exits; it no longer serves)
            time.sleep(0.1)
        else:
            pytest.fail(f"gunicorn {pid} outlived the process that started it")
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
    finally:
        if parent.poll() is None:
            parent.kill()
