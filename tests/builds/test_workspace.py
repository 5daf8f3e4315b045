"""Temporary files of uploads and builds (builds.workspace): all under REGISTRY_DATA_DIR/tmp, named
by whose they are, gone when their publish ends, and swept when a dead process left them."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from builds import workspace
from builds.models import Build
from builds.uploads import LimitedHashingUploadHandler

pytest_plugins = ["tests.factories"]


def tmp_entries(settings: Any) -> list[str]:
    root = Path(settings.REGISTRY_TMP_DIR)
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_a_publish_leaves_no_temporary_file_whether_it_succeeds_or_fails(
    client: Client, token: str, tmp_path: Path, private_tmp: Path, settings: Any
) -> None:
    from tests.factories import package, publish

    seen: list[str] = []
    real = workspace.build_dir

    def watched(build_id: object, attempt: int) -> Path:
        path = real(build_id, attempt)
        seen.append(path.name)
        return path

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(workspace, "build_dir", watched)
        ok = publish(client, token, package(tmp_path / "a", "demo", "1.0.0")).json()["data"]
        again = publish(client, token, package(tmp_path / "b", "demo", "1.0.0")).json()["data"]
    assert (ok["status"], again["status"]) == ("succeeded", "failed")
    assert seen == [f"build-{ok['id']}-1", f"build-{again['id']}-1"]  # named by the build and the attempt
    assert tmp_entries(settings) == []


def test_an_upload_streams_to_a_file_named_by_its_id_which_the_build_takes(
    rf: Any, private_tmp: Path, settings: Any
) -> None:
    request = rf.post("/api/v1/extensions/")
    handler = LimitedHashingUploadHandler(request, limit=1024)
    handler.new_file("file", "demo.tar.gz", "application/gzip", 10)
    handler.receive_data_chunk(b"0123456789", 0)
    upload = handler.file_complete(10)
    assert tmp_entries(settings) == [f"upload-{handler.upload_id}.1.part"]
    assert upload.read() == b"0123456789" and upload.size == 10
    assert upload.sha256 == "84d89877f0d4041efb6bf91a16f0248f2fd573e6af05c19f96bedb9f882f7882"
    upload.close()
    assert tmp_entries(settings) == []


def test_an_upload_past_the_limit_leaves_nothing(rf: Any, private_tmp: Path, settings: Any) -> None:
    handler = LimitedHashingUploadHandler(rf.post("/"), limit=4)
    handler.new_file("file", "demo.tar.gz", "application/gzip", 10)
    with pytest.raises(Exception, match="larger than the limit"):
        handler.receive_data_chunk(b"0123456789", 0)
    assert tmp_entries(settings) == []


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


@pytest.mark.django_db
def test_the_sweeper_removes_what_dead_processes_left_and_nothing_alive(
    private_tmp: Path, settings: Any, user: Any
) -> None:
    def build(status: str, attempts: int) -> Build:
        return Build.objects.create(kind="package", status=status, attempts=attempts, submitted_by=user)

    finished, running, reclaimed = build("failed", 1), build("running", 1), build("running", 2)
    dead_upload, live_upload = uuid.uuid4(), uuid.uuid4()
    entries = {
        f"upload-{running.pk}.1.part": 0,  # became a build: staged in storage already
        f"upload-{dead_upload}.1.part": 7200,  # never became a build, not written for two hours
        f"upload-{live_upload}.1.part": 1,  # still streaming in
        f"build-{finished.pk}-1": 0,  # the build ended
        f"build-{running.pk}-1": 7200,  # the build's current attempt: alive, however old
        f"build-{reclaimed.pk}-1": 0,  # an attempt the reaper took over from
        f"build-{reclaimed.pk}-2": 0,
        f"build-{uuid.uuid4()}-1": 7200,  # no such build
        "tool-leftover": 7200,
        "tool-recent": 1,
    }
    for name, age in entries.items():
        path = private_tmp / name
        if name.startswith(("build-", "tool-")):
            path.mkdir()
            (path / "f").write_text("x")
        else:
            path.write_text("x")
        _age(path, age)
    removed = workspace.tmp_sweep(grace_seconds=3600)
    assert tmp_entries(settings) == sorted(
        [
            f"upload-{live_upload}.1.part",
            f"build-{running.pk}-1",
            f"build-{reclaimed.pk}-2",
            "tool-recent",
        ]
    )
    assert removed == {"uploads": 2, "builds": 3}
