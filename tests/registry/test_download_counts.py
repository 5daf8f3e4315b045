"""Download counts (registry.downloadcounts): accumulated outside the database, per version per
day, written in batches by a flush; correct after a flush, never lost on a failed write, never
counted twice, never decreasing; shared through Redis when it is configured."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from registry import downloadcounts
from registry.models import DailyDownloads, Extension, Version

if TYPE_CHECKING:
    from tests.factories import Publisher

pytest_plugins = ["tests.factories"]

URL = "/api/v1/extensions/{name}/versions/{version}/download"


def download(client: Client, name: str, version: str) -> None:
    response = client.get(URL.format(name=name, version=version))
    assert response.status_code == 200
    b"".join(response.streaming_content)  # type: ignore[attr-defined]


def totals(name: str) -> tuple[int, dict[str, int]]:
    extension = Extension.objects.get(name=name)
    return extension.downloads, dict(extension.versions.values_list("version", "downloads"))


def daily(name: str) -> dict[tuple[str, str], int]:
    rows = DailyDownloads.objects.filter(version__extension__name=name)
    return {(r.version.version, r.day.isoformat()): r.count for r in rows.select_related("version")}


def database_down(batch: Any) -> int:
    raise RuntimeError("database down")


@pytest.fixture
def two(publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    publisher("etcd", "3.5.12")
    publisher("redis", "7.2.4")


def test_counts_are_written_by_the_flush_per_version_per_day_and_in_total(
    client: Client, two: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(downloadcounts, "_today", lambda: "2026-03-01")
    for version in ("3.5.9", "3.5.12", "3.5.12"):
        download(client, "etcd", version)
    download(client, "redis", "7.2.4")
    assert totals("etcd") == (0, {"3.5.9": 0, "3.5.12": 0})  # nothing written yet
    assert downloadcounts.flush() == 4
    assert totals("etcd") == (3, {"3.5.9": 1, "3.5.12": 2})
    assert totals("redis") == (1, {"7.2.4": 1})
    monkeypatch.setattr(downloadcounts, "_today", lambda: "2026-03-02")
    download(client, "etcd", "3.5.12")
    assert downloadcounts.flush() == 1
    assert totals("etcd") == (4, {"3.5.9": 1, "3.5.12": 3})
    assert daily("etcd") == {("3.5.9", "2026-03-01"): 1, ("3.5.12", "2026-03-01"): 2, ("3.5.12", "2026-03-02"): 1}
    assert downloadcounts.flush() == 0  # nothing new: nothing written, nothing changed
    assert totals("etcd") == (4, {"3.5.9": 1, "3.5.12": 3})
    # a second flush on the same day adds to that day's row
    download(client, "etcd", "3.5.12")
    download(client, "etcd", "3.5.12")
    assert downloadcounts.flush() == 2
    assert daily("etcd") == {("3.5.9", "2026-03-01"): 1, ("3.5.12", "2026-03-01"): 2, ("3.5.12", "2026-03-02"): 3}
    assert totals("etcd") == (6, {"3.5.9": 1, "3.5.12": 5})


def test_a_flush_costs_a_few_statements_whatever_the_batch(two: None) -> None:
    ids = list(Version.objects.values_list("pk", flat=True))
    for i in range(300):
        downloadcounts.record(ids[i % len(ids)])
    with CaptureQueriesContext(connection) as queries:
        assert downloadcounts.flush() == 300
    # the existing versions, then the day rows, the versions' and the extensions' totals, each one
    # statement run for every row (executemany), plus the savepoint statements of the transaction
    statements = [q["sql"] for q in queries.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))]
    assert len(statements) == 4, statements
    assert sum(totals(name)[0] for name in ("etcd", "redis")) == 300


def test_counts_recorded_during_a_flush_are_neither_lost_nor_counted_twice(two: None) -> None:
    version = Version.objects.get(extension__name="redis")
    stop = threading.Event()
    recorded = [0]

    def download_all_the_time() -> None:
        while not stop.is_set():
            downloadcounts.record(version.pk)
            recorded[0] += 1

    thread = threading.Thread(target=download_all_the_time)
    thread.start()
    seen = []
    try:
        for _ in range(10):
            downloadcounts.flush()
            seen.append(Version.objects.get(pk=version.pk).downloads)
    finally:
        stop.set()
        thread.join()
    downloadcounts.flush()
    assert seen == sorted(seen)  # monotone
    assert Version.objects.get(pk=version.pk).downloads == recorded[0]
    assert Extension.objects.get(name="redis").downloads == recorded[0]


def test_a_failed_write_puts_the_counts_back(two: None, monkeypatch: pytest.MonkeyPatch) -> None:
    version = Version.objects.get(extension__name="redis")
    for _ in range(3):
        downloadcounts.record(version.pk)
    with monkeypatch.context() as patched:
        patched.setattr(downloadcounts, "write", database_down)
        with pytest.raises(RuntimeError):
            downloadcounts.flush()
    assert downloadcounts.pending_local() == 3
    assert downloadcounts.flush() == 3
    assert totals("redis") == (3, {"7.2.4": 3})


def test_counts_of_a_version_that_does_not_exist_are_dropped(two: None) -> None:
    version = Version.objects.get(extension__name="redis")
    downloadcounts.record(version.pk)
    downloadcounts.record(10**9)
    assert downloadcounts.flush() == 1
    assert totals("redis") == (1, {"7.2.4": 1})


@pytest.fixture
def shared(settings: Any, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    import redis

    client = redis.Redis.from_url(redis_url)
    client.delete(downloadcounts.PENDING_KEY)
    settings.REGISTRY_DOWNLOADS_REDIS_URL = redis_url
    monkeypatch.setattr(downloadcounts, "_redis_down_until", 0.0)
    return client


@pytest.mark.redis
def test_with_redis_counts_are_shared_and_drained_by_any_flusher(client: Client, two: None, shared: Any) -> None:
    for version in ("3.5.9", "3.5.12", "3.5.12"):
        download(client, "etcd", version)
    assert downloadcounts.pending_local() == 0  # counted in Redis, not in this process
    assert sum(int(v) for v in shared.hgetall(downloadcounts.PENDING_KEY).values()) == 3
    assert downloadcounts.drain_shared() == 3
    assert totals("etcd") == (3, {"3.5.9": 1, "3.5.12": 2})
    assert shared.exists(downloadcounts.PENDING_KEY) == 0
    assert downloadcounts.drain_shared() == 0


@pytest.mark.redis
def test_with_redis_a_failed_write_puts_the_batch_back(two: None, shared: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    version = Version.objects.get(extension__name="redis")
    downloadcounts.record(version.pk)
    downloadcounts.record(version.pk)
    with monkeypatch.context() as patched:
        patched.setattr(downloadcounts, "write", database_down)
        with pytest.raises(RuntimeError):
            downloadcounts.drain_shared()
    assert downloadcounts.drain_shared() == 2
    assert totals("redis") == (2, {"7.2.4": 2})


@pytest.mark.redis
def test_with_redis_counts_taken_while_downloads_go_on_are_each_written_once(
    shared: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Drains race four threads counting 2,000 downloads: every count is in exactly one batch (a
    count that lands between a batch's read and its removal would be lost), and the hash is gone."""
    import threading
    from collections import Counter

    written: Counter[tuple[int, str]] = Counter()

    def write(batch: Counter[tuple[int, str]]) -> int:
        written.update(batch)
        return sum(batch.values())

    monkeypatch.setattr(downloadcounts, "write", write)

    def count(version_id: int) -> None:
        for _ in range(500):
            downloadcounts.record(version_id)

    threads = [threading.Thread(target=count, args=(version_id,)) for version_id in (1, 2, 3, 4)]
    for thread in threads:
        thread.start()
    drained = 0
    while any(thread.is_alive() for thread in threads):
        drained += downloadcounts.drain_shared()
    for thread in threads:
        thread.join()
    drained += downloadcounts.drain_shared()
    assert drained == 2000
    per_version: Counter[int] = Counter()
    for (version_id, _), n in written.items():  # one day each, or two across midnight (UTC)
        per_version[version_id] += n
    assert per_version == {1: 500, 2: 500, 3: 500, 4: 500}
    assert shared.exists(downloadcounts.PENDING_KEY) == 0
    assert shared.keys("registry:downloads:*") == []


def test_background_passes_write_the_counts_while_redis_and_the_repair_fail(
    two: None, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A web process's background thread (embedded mode): Redis does not answer and the static
    index repair fails on every pass, yet each pass after the first writes the process's counts,
    and the first pass's full repair is tried again until it succeeds."""
    from types import SimpleNamespace

    from registry import background
    from tests.services import free_port

    settings.REGISTRY_HOUSEKEEPING = True
    settings.REGISTRY_DOWNLOADS_REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens
    monkeypatch.setattr(downloadcounts, "_redis_down_until", 0.0)
    monkeypatch.setattr(downloadcounts, "_REDIS_RETRY_SECONDS", 0.0)  # every call tries Redis again
    repairs: list[Any] = []

    def repair(*, updated_since: Any) -> None:
        repairs.append(updated_since)
        raise OSError("storage is down")

    monkeypatch.setattr(background, "static_index_repair", repair)
    # (The test's transaction must outlive the passes, which close the thread's connection.)
    monkeypatch.setattr(background, "close_old_connections", lambda: None)
    monkeypatch.setattr(background, "connection", SimpleNamespace(close=lambda: None))
    version = Version.objects.get(extension__name="redis")
    passes = background.Passes()
    passes.run()  # as the first request is answered: its count is left to the next pass
    downloadcounts.record(version.pk)  # counted in this process: Redis does not answer
    assert downloadcounts.pending_local() == 1
    passes.run()
    assert totals("redis") == (1, {"7.2.4": 1})
    assert repairs == [None, None]  # everything, both times


@pytest.mark.redis
def test_while_redis_is_down_downloads_still_work_and_are_counted_here(
    client: Client, two: None, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.services import free_port

    settings.REGISTRY_DOWNLOADS_REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens
    monkeypatch.setattr(downloadcounts, "_redis_down_until", 0.0)
    download(client, "redis", "7.2.4")
    download(client, "redis", "7.2.4")
    assert downloadcounts.pending_local() == 2
    assert downloadcounts.flush() == 2  # the buffer is written; the Redis drain is skipped
    assert totals("redis") == (2, {"7.2.4": 2})


@pytest.mark.redis
@pytest.mark.slow
def test_with_a_broker_the_beat_task_on_a_worker_writes_the_shared_counts(
    live_db_url: str, celery_worker_factory: Any, settings: Any, tmp_path: Any
) -> None:
    import time

    from registry.celery import app
    from tests.factories import make_token, make_user, package, publish

    worker = celery_worker_factory()  # this process now sends tasks to its broker, Redis
    settings.REGISTRY_DOWNLOADS_REDIS_URL = settings.CELERY_BROKER_URL  # as registry.settings derives it
    client = Client()
    token = make_token(make_user("alice"))
    assert publish(client, token, package(tmp_path, "redis", "7.2.4")).status_code == 202
    deadline = time.monotonic() + 60
    while not Version.objects.filter(extension__name="redis").exists() and time.monotonic() < deadline:
        time.sleep(0.1)  # the worker builds it
    for _ in range(4):
        download(client, "redis", "7.2.4")
    assert downloadcounts.pending_local() == 0 and totals("redis")[0] == 0
    app.send_task("registry.flush_downloads")  # what Celery beat sends every 5 s
    while totals("redis")[0] < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert totals("redis") == (4, {"7.2.4": 4}), worker.output()[-2000:]
