"""The background work of real web processes (gunicorn, registry.background): download counts
are written by the flush, a graceful stop writes the last ones, and a restarted process repairs
the static index files a dead one left behind."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.live_registry import LiveRegistry
from tests.services import BASE_DIR

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("live")]

DOWNLOAD = "/api/v1/extensions/redis/versions/7.2.4/download"


def downloads(registry: LiveRegistry) -> int:
    response = httpx.get(f"{registry.url}/api/v1/extensions/redis/", timeout=10)
    return int(response.json()["data"]["downloads"])


# Counts are written with REGISTRY_HOUSEKEEPING off too: they are not housekeeping.
HOUSEKEEPING = pytest.mark.parametrize("housekeeping", ["1", "0"], ids=["housekeeping", "no-housekeeping"])


@HOUSEKEEPING
def test_counts_are_flushed_and_a_graceful_stop_loses_none(tmp_path: Path, housekeeping: str) -> None:
    env = {"REGISTRY_DOWNLOADS_FLUSH_SECONDS": "3600", "REGISTRY_HOUSEKEEPING": housekeeping}
    registry = LiveRegistry(tmp_path / "registry", env=env)
    registry.start(workers=2, threads=2)
    try:
        registry.manage("publish", str(BASE_DIR / "extensions" / "taskservs" / "redis"))
        with httpx.Client(base_url=registry.url, timeout=10) as http:
            for _ in range(12):
                assert http.get(DOWNLOAD).status_code == 200
        assert downloads(registry) == 0  # buffered in the web processes: no write per download
        registry.stop()  # SIGTERM: each worker writes its buffer as it exits
        registry.start(workers=2, threads=2)
        assert downloads(registry) == 12
    finally:
        registry.stop()


@HOUSEKEEPING
def test_counts_are_written_every_flush_interval(tmp_path: Path, housekeeping: str) -> None:
    env = {"REGISTRY_DOWNLOADS_FLUSH_SECONDS": "1", "REGISTRY_HOUSEKEEPING": housekeeping}
    registry = LiveRegistry(tmp_path / "registry", env=env)
    registry.start(workers=2, threads=2)
    try:
        registry.manage("publish", str(BASE_DIR / "extensions" / "taskservs" / "redis"))
        with httpx.Client(base_url=registry.url, timeout=10) as http:
            for _ in range(7):
                assert http.get(DOWNLOAD).status_code == 200
        deadline = time.monotonic() + 20
        while downloads(registry) < 7 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert downloads(registry) == 7
    finally:
        registry.stop()


def test_a_restarted_process_repairs_the_static_index(tmp_path: Path) -> None:
    registry = LiveRegistry(tmp_path / "registry")
    registry.start(workers=1, threads=2)
    try:
        registry.manage("publish", str(BASE_DIR / "extensions" / "taskservs" / "redis"))
        static = registry.data_dir / "packages" / "index" / "redis"
        expected = httpx.get(f"{registry.url}/api/v1/index/redis", timeout=10).content
        assert static.read_bytes() == expected
        registry.stop()
        static.write_bytes(b"left behind by a crash")
        registry.start(workers=1, threads=2)  # its first request starts the background thread
        deadline = time.monotonic() + 20
        while static.read_bytes() != expected and time.monotonic() < deadline:
            time.sleep(0.2)
        assert static.read_bytes() == expected
    finally:
        registry.stop()
