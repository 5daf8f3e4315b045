"""Download counts, kept off the download path: a download never writes to the database.

`record` adds one to a counter outside the database, keyed by version and day (UTC): a Redis hash
when REGISTRY_DOWNLOADS_REDIS_URL is set (CACHE_URL, else the broker, when it is Redis), so every
process on every machine shares it; otherwise a buffer in this process. `flush` writes what has
accumulated in one transaction: the per-day rows (`DailyDownloads`) and the totals of each version
and extension, advanced together so that they always agree.

Who flushes, every REGISTRY_DOWNLOADS_FLUSH_SECONDS: each web process's background thread
(`registry.background`) its own buffer, and in embedded mode (no broker, so no Celery beat) the
Redis hash too; with a broker, Celery beat's ``registry.flush_downloads`` drains the Redis hash.

What a crash costs: counts buffered in a process that is killed (SIGKILL, power loss) are lost,
at most one flush interval of that process's downloads; a graceful stop (SIGTERM) flushes at exit.
A Redis batch is taken atomically (read and removed in one MULTI/EXEC transaction), so two
flushers never write the same counts; a batch whose database write fails is put back; a flusher
killed between taking a batch and committing it loses that batch (one interval). Counts are
never written twice and never decrease. While Redis is unreachable, downloads are counted in the
process buffer instead (and written from there).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from datetime import date
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Field, Model

from registry.models import DailyDownloads, Extension, Version
from registry.selectors import catalog_changed

log = logging.getLogger(__name__)

PENDING_KEY = "registry:downloads:pending"
_REDIS_RETRY_SECONDS = 5.0  # after a Redis failure, count locally for this long before trying again
_CHUNK = 500

Key = tuple[int, str]  # (version id, day as YYYY-MM-DD in UTC)

_lock = threading.Lock()
_pending: Counter[Key] = Counter()
_redis: tuple[str, Any] | None = None  # (url, client) of this process
_redis_down_until = 0.0


def _reset_after_fork() -> None:
    # Counts buffered before a fork belong to the parent; the child starts empty.
    global _lock, _pending, _redis
    _lock, _pending, _redis = threading.Lock(), Counter(), None


os.register_at_fork(after_in_child=_reset_after_fork)


def _today() -> str:
    return time.strftime("%Y-%m-%d", time.gmtime())


def _client() -> Any | None:
    """This process's Redis client, or None without Redis (or for a while after it failed)."""
    global _redis
    url = settings.REGISTRY_DOWNLOADS_REDIS_URL
    if not url or time.monotonic() < _redis_down_until:
        return None
    if _redis is None or _redis[0] != url:
        import redis

        _redis = (url, redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=0.5))
    return _redis[1]


def _redis_failed(what: str, exc: Exception) -> None:
    global _redis_down_until
    _redis_down_until = time.monotonic() + _REDIS_RETRY_SECONDS
    log.warning("download counts: Redis %s failed (%s); counting in this process for now", what, exc)


def record(version_id: int) -> None:
    """Count one download of a version. No database access; never raises for a counter outage."""
    key = (version_id, _today())
    client = _client()
    if client is not None:
        try:
            client.hincrby(PENDING_KEY, f"{key[0]}:{key[1]}", 1)
            return
        except Exception as exc:  # noqa: BLE001 - a counter outage must never fail a download
            _redis_failed("HINCRBY", exc)
    with _lock:
        _pending[key] += 1


def pending_local() -> int:
    """Downloads counted in this process and not yet written."""
    with _lock:
        return sum(_pending.values())


def discard_local() -> int:
    """Forget the counts buffered in this process (for tests: between two tests, ids are reused)."""
    global _pending
    with _lock:
        dropped, _pending = sum(_pending.values()), Counter()
    return dropped


def flush_local() -> int:
    """Write this process's buffer to the database; on failure, the counts go back into it."""
    global _pending
    with _lock:
        batch, _pending = _pending, Counter()
    if not batch:
        return 0
    try:
        return write(batch)
    except Exception:
        with _lock:
            _pending.update(batch)
        raise


def drain_shared() -> int:
    """Write the counts accumulated in Redis to the database (nothing without Redis)."""
    client = _client()
    if client is None:
        return 0
    # Read and removed in one MULTI/EXEC transaction: no count lands between the two and no other
    # flusher takes the same counts. A connection lost before EXEC leaves the hash as it was; an
    # answer lost after it loses the batch (as a flusher killed before its commit does).
    pipe = client.pipeline(transaction=True)
    pipe.hgetall(PENDING_KEY)
    pipe.delete(PENDING_KEY)
    raw, _ = pipe.execute()
    batch: Counter[Key] = Counter()
    for field, value in raw.items():
        version, _, day = field.decode().partition(":")
        batch[(int(version), day)] += int(value)
    try:
        return write(batch)
    except Exception:
        pipe = client.pipeline()
        for (version_id, day), count in batch.items():
            pipe.hincrby(PENDING_KEY, f"{version_id}:{day}", count)
        pipe.execute()
        raise


def drain_shared_unless_down() -> int:
    """`drain_shared`, with a Redis outage logged (downloads are counted in the process meanwhile)
    rather than raised."""
    try:
        return drain_shared()
    except Exception as exc:
        import redis

        if not isinstance(exc, redis.RedisError):
            raise
        _redis_failed("flush", exc)
        return 0


def flush() -> int:
    """Write every count this process can reach: its own buffer, then the shared Redis hash."""
    return flush_local() + drain_shared_unless_down()


def _chunks(items: list[int]) -> list[list[int]]:
    return [items[i : i + _CHUNK] for i in range(0, len(items), _CHUNK)]


def _column(model: type[Model], name: str) -> str:
    field = model._meta.get_field(name)
    assert isinstance(field, Field)
    return connection.ops.quote_name(field.column)


def _existing(version_ids: list[int]) -> dict[int, int]:
    """The extension of each version that exists, by version id (in chunks of _CHUNK ids; the
    statement is built as `_statements` says)."""
    q = connection.ops.quote_name
    pk, table, extension = q(Version._meta.pk.column), q(Version._meta.db_table), _column(Version, "extension")
    found: dict[int, int] = {}
    with connection.cursor() as cursor:
        for chunk in _chunks(version_ids):
            marks = ", ".join(["%s"] * len(chunk))
            select = f"SELECT {pk}, {extension} FROM {table} WHERE {pk} IN ({marks})"  # noqa: S608
            cursor.execute(select, chunk)
            found.update(cursor.fetchall())
    return found


def _statements() -> tuple[str, str, str]:
    """The three writes of a flush, each run once per row with executemany (no model objects, no
    query compiled per batch: a flush of thousands of counts costs milliseconds of this process's
    interpreter, not a quarter of a second). An upsert: SQLite and PostgreSQL both spell it so.
    (Built as strings, which the linter flags: the only names in them are the models' tables and
    columns, quoted by the database backend, and every value is a parameter.)"""
    q = connection.ops.quote_name
    daily, version, extension = (q(m._meta.db_table) for m in (DailyDownloads, Version, Extension))
    count = _column(DailyDownloads, "count")
    version_downloads, extension_downloads = _column(Version, "downloads"), _column(Extension, "downloads")
    version_pk, extension_pk = q(Version._meta.pk.column), q(Extension._meta.pk.column)
    key = f"{_column(DailyDownloads, 'version')}, {_column(DailyDownloads, 'day')}"
    add = f"{count} = {daily}.{count} + excluded.{count}"
    return (
        f"INSERT INTO {daily} ({key}, {count}) VALUES (%s, %s, %s) ON CONFLICT ({key}) DO UPDATE SET {add}",  # noqa: S608
        f"UPDATE {version} SET {version_downloads} = {version_downloads} + %s WHERE {version_pk} = %s",  # noqa: S608
        f"UPDATE {extension} SET {extension_downloads} = {extension_downloads} + %s WHERE {extension_pk} = %s",  # noqa: S608
    )


def write(batch: Counter[Key]) -> int:
    """Add a batch of counts to the database in one transaction: a lookup of the versions that
    exist (one statement per _CHUNK of them), then three writes whatever the batch's size (the day
    rows, the versions' and the extensions' totals, each in the order of their keys, so that two
    flushers lock rows in the same order). Counts of versions that do not exist are dropped."""
    with transaction.atomic():
        extension_of = _existing(sorted({version_id for version_id, _ in batch}))
        batch = Counter({key: n for key, n in batch.items() if key[0] in extension_of and n > 0})
        if not batch:
            return 0
        transaction.on_commit(catalog_changed)  # the catalog's totals (registry.selectors.catalog_cached)
        per_version: Counter[int] = Counter()
        per_extension: Counter[int] = Counter()
        for (version_id, _), n in batch.items():
            per_version[version_id] += n
            per_extension[extension_of[version_id]] += n
        days, versions, extensions = _statements()
        with connection.cursor() as cursor:
            cursor.executemany(days, [(v, date.fromisoformat(d), n) for (v, d), n in sorted(batch.items())])
            cursor.executemany(versions, [(n, pk) for pk, n in sorted(per_version.items())])
            cursor.executemany(extensions, [(n, pk) for pk, n in sorted(per_extension.items())])
    return sum(batch.values())
