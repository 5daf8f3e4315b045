"""Concurrent publishes keep the signed index consistent (SPEC 6.1), on PostgreSQL under gunicorn:
ten publishes at once, five of them new versions of one extension (so they re-sign the same bin,
the same snapshot and the same timestamp), five new extensions."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from tuf.ngclient import Updater

from tests.live_registry import LiveRegistry

pytest_plugins = ["tests.factories"]


def _package(tmp_path: Path, name: str, version: str) -> bytes:
    from tests.factories import package

    return package(tmp_path / f"{name}-{version}", name, version).read_bytes()


@pytest.mark.postgres
@pytest.mark.slow
def test_ten_concurrent_publishes_are_all_signed_and_the_metadata_stays_consistent(
    tmp_path: Path, postgres_server: Any
) -> None:
    database = postgres_server.create_database("signed")
    registry = LiveRegistry(tmp_path / "registry", database_url=database)
    registry.start(workers=4, threads=4)
    try:
        token = registry.createtoken("alice")
        headers = {"Authorization": f"Bearer {token}"}
        first = httpx.post(
            f"{registry.url}/api/v1/extensions/",
            files={"file": ("shared-1.0.0.tar.gz", _package(tmp_path, "shared", "1.0.0"), "application/gzip")},
            headers=headers,
            timeout=120,
        )
        assert first.json()["data"]["status"] == "succeeded", first.text
        before = httpx.get(f"{registry.url}/tuf/metadata/timestamp.json", timeout=30).json()["signed"]
        jobs = [("shared", f"1.{i}.0") for i in range(1, 6)] + [(f"fresh{i}", "1.0.0") for i in range(5)]
        bodies = {job: _package(tmp_path, *job) for job in jobs}
        barrier = threading.Barrier(len(jobs))
        results: dict[tuple[str, str], httpx.Response] = {}
        lock = threading.Lock()

        def publish(job: tuple[str, str]) -> None:
            with httpx.Client(timeout=180) as http:
                barrier.wait()
                response = http.post(
                    f"{registry.url}/api/v1/extensions/",
                    files={"file": (f"{job[0]}-{job[1]}.tar.gz", bodies[job], "application/gzip")},
                    headers=headers,
                )
            with lock:
                results[job] = response

        threads = [threading.Thread(target=publish, args=(job,)) for job in jobs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(240)
        assert sorted(r.json()["data"]["status"] for r in results.values()) == ["succeeded"] * 10, [
            r.text[:300] for r in results.values()
        ]
        check = registry.manage("trust", "check", check=False)
        assert check.returncode == 0, check.stderr
        after = httpx.get(f"{registry.url}/tuf/metadata/timestamp.json", timeout=30).json()["signed"]
        # Each publish re-signed the snapshot once, one after the other: none was lost or merged.
        assert after["meta"]["snapshot.json"]["version"] == before["meta"]["snapshot.json"]["version"] + 10
        root = httpx.get(f"{registry.url}/tuf/metadata/1.root.json", timeout=30).content
        (tmp_path / "client").mkdir()
        updater = Updater(
            metadata_dir=str(tmp_path / "client"),
            metadata_base_url=f"{registry.url}/tuf/metadata/",
            target_base_url=f"{registry.url}/tuf/targets/",
            bootstrap=root,
        )
        for name, version in jobs:
            info = updater.get_targetinfo(f"packages/{name}/{name}-{version}.tar.gz")
            assert info is not None, (name, version)
        index = updater.get_targetinfo("index/shared.json")
        assert index is not None
        document = Path(updater.download_target(index, str(tmp_path / "shared.json"))).read_text()
        assert all(f'"version":"1.{i}.0"' in document for i in range(6))
    finally:
        registry.stop()
