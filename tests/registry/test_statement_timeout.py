"""A statement PostgreSQL stops at its ``statement_timeout`` (set in DATABASE_URL's ``options``, as
docs/deploy.md advises for web nodes): the request answers 503 ``database_unavailable`` saying the
database did not answer in time (the catalog's pages: their 503 page), soon, and not a 500 or a
thread held for as long as the lock lasts; once the lock is gone the same request answers 200."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from django.db import OperationalError

from registry.errors import DatabaseUnavailable
from tests.live_registry import LiveRegistry

STATEMENT_TIMEOUT_MS = 500


@pytest.mark.postgres
@pytest.mark.slow
def test_a_request_behind_a_lock_answers_503_after_the_statement_timeout_and_200_once_it_is_gone(
    tmp_path: Path, postgres_server: Any
) -> None:
    database = postgres_server.create_database("registry_timeout")
    registry = LiveRegistry(
        tmp_path / "registry",
        database_url=f"{database}?options=-c%20statement_timeout%3D{STATEMENT_TIMEOUT_MS}",
    )
    registry.start()
    try:
        registry.manage("publish", "--user", "alice", "extensions/taskservs/etcd/3.5.9")
        paths = ["/api/v1/extensions/", "/api/v1/extensions/etcd/", "/api/v1/index/etcd", "/extensions/etcd/"]
        with psycopg.connect(database) as locker:
            # What a migration rewriting the table holds, or a session left in a transaction.
            locker.execute("LOCK TABLE registry_extension, registry_version IN ACCESS EXCLUSIVE MODE")
            for path in paths:
                started = time.monotonic()
                answer = httpx.get(registry.url + path, timeout=60)
                took = time.monotonic() - started
                assert answer.status_code == 503, (path, answer.status_code, answer.text[:300])
                assert answer.headers["Retry-After"]
                assert took < 10, f"{path} held its request for {took:.1f} s"
                if not path.startswith("/api/"):  # the catalog's page for visitors: "try again"
                    assert answer.headers["Content-Type"].startswith("text/html")
                    assert "Try again in a few seconds" in answer.text
                    continue
                error = answer.json()["error"]
                assert error["code"] == "database_unavailable"
                assert "did not answer in time" in error["message"] and "statement_timeout" in error["message"]
            locker.rollback()
        for path in paths:
            assert httpx.get(registry.url + path, timeout=60).status_code == 200, path
    finally:
        registry.stop()


def test_any_other_database_error_is_an_outage_as_before() -> None:
    """Without the driver's timeout SQLSTATE (a refused or dropped connection), the message is the
    outage's."""
    refused = OperationalError("connection refused")
    assert DatabaseUnavailable.for_error(refused).message == DatabaseUnavailable().message
    other = OperationalError("terminating connection due to administrator command")
    other.__cause__ = type("AdminShutdown", (Exception,), {"sqlstate": "57P01"})()
    assert "did not answer in time" not in DatabaseUnavailable.for_error(other).message
    timed_out = OperationalError("canceling statement due to statement timeout")
    timed_out.__cause__ = type("QueryCanceled", (Exception,), {"sqlstate": "57014"})()
    assert "did not answer in time" in DatabaseUnavailable.for_error(timed_out).message
