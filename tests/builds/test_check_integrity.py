"""`manage.py check_integrity` (issue 15): zero problems on a consistent registry, and each kind of
problem it claims to find, found and named, with exit status 1."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction

from builds.models import Build
from registry import storage
from registry.models import DailyDownloads, Extension, Version
from registry.trust import repository
from registry.trust.models import TrustTarget

pytest_plugins = ["tests.factories"]

ORPHAN = "0" * 64


@pytest.fixture
def signed(db: None, settings: Any, private_storage: Path, tmp_path: Path) -> Path:
    settings.REGISTRY_TUF_KEYS_DIR = tmp_path / "keys"
    with transaction.atomic():
        repository.init(root_key_dir=tmp_path / "root", bit_length=4)
    return private_storage


def check(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("check_integrity", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return exc.returncode, out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def _age(path: Path, seconds: float = 3600) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old))


@pytest.fixture
def published(signed: Path, publisher: Any) -> Path:
    publisher("etcd", "3.5.9")
    publisher("etcd", "3.5.12")
    publisher("redis", "7.2.4")
    return signed


def test_a_consistent_registry_has_no_problems(published: Path) -> None:
    status, out, err = check()
    assert (status, err) == (0, "")
    assert out.strip() == "checked 3 versions, 3 objects, the signed index and the download counts: no problems"


def test_it_finds_a_version_whose_package_is_missing(published: Path) -> None:
    version = Version.objects.get(extension__name="etcd", version="3.5.9")
    (published / version.storage_key).unlink()
    status, out, err = check()
    assert status == 1
    assert f"etcd@3.5.9: its package {version.storage_key} is missing from storage" in err
    # The signed index's own check sees the same loss, from its side: a target without its bytes.
    assert "signed index: the bytes of target packages/etcd/etcd-3.5.9.tar.gz are missing" in err
    assert out.endswith("2 problem(s)\n")


def test_it_finds_a_package_whose_bytes_changed(published: Path) -> None:
    version = Version.objects.get(extension__name="redis")
    path = published / version.storage_key
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # same size, other bytes
    path.write_bytes(bytes(data))
    status, _, err = check()
    assert status == 1 and "redis@7.2.4: its package's sha256 is " in err and f"says {version.sha256}" in err
    # --quick reads sizes only: it cannot see this one, and says nothing it has not checked.
    assert check("--quick")[0] == 0
    path.write_bytes(bytes(data[:-1]))  # a torn object: the size tells
    status, _, err = check("--quick")
    assert status == 1 and f"its package is {len(data) - 1} bytes in storage, the catalogue says {len(data)}" in err


def test_it_finds_an_object_that_belongs_to_no_version_once_it_is_older_than_the_grace(published: Path) -> None:
    key = storage.package_key(ORPHAN)
    path = published / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"left by a worker that died before committing")
    assert check()[0] == 0  # young: it may be a publish in flight
    _age(path)
    status, _, err = check()
    assert status == 1 and f"object {key} belongs to no version" in err and "sweepstorage" in err
    call_command("sweepstorage", stdout=io.StringIO())
    assert check()[0] == 0 and not path.exists()


def test_it_finds_a_staged_upload_that_no_build_needs(published: Path) -> None:
    build = Build.objects.filter(status=Build.Status.SUCCEEDED).first()
    assert build is not None
    key = storage.upload_key(str(build.pk))
    path = published / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"staged")
    status, _, err = check("--grace-seconds", "0")
    assert status == 1 and f"staged upload {key} belongs to no unfinished build" in err


def test_it_finds_the_signed_index_disagreeing_with_the_catalogue(published: Path) -> None:
    target = TrustTarget.objects.get(path="packages/redis/redis-7.2.4.tar.gz")
    TrustTarget.objects.filter(pk=target.pk).update(sha256="f" * 64)
    status, _, err = check()
    assert status == 1
    assert "signed index: target packages/redis/redis-7.2.4.tar.gz: signed as sha256 ffff" in err
    TrustTarget.objects.filter(pk=target.pk).delete()  # a version the signed metadata does not cover
    status, _, err = check()
    assert "signed index: target packages/redis/redis-7.2.4.tar.gz (sha256" in err and "not signed" in err


def test_it_finds_download_counts_that_are_negative_or_do_not_add_up(published: Path) -> None:
    version = Version.objects.get(extension__name="etcd", version="3.5.12")
    DailyDownloads.objects.create(version=version, day="2025-01-02", count=7)
    Version.objects.filter(pk=version.pk).update(downloads=5)
    Extension.objects.filter(name="etcd").update(downloads=5)
    Version.objects.filter(extension__name="redis").update(downloads=-1)
    status, _, err = check()
    assert status == 1
    assert "etcd@3.5.12: 5 downloads in all, fewer than the 7 its days add up to" in err
    assert "has a negative download count (-1)" in err


def test_download_totals_never_shrink_between_runs(published: Path, tmp_path: Path) -> None:
    Version.objects.filter(extension__name="redis").update(downloads=9)
    Extension.objects.filter(name="redis").update(downloads=9)
    status, out, _ = check("--json")
    assert status == 0
    report = json.loads(out)
    assert report["problems"] == [] and report["downloads"]["redis@7.2.4"] == 9
    before = tmp_path / "before.json"
    before.write_text(out)
    Version.objects.filter(extension__name="redis").update(downloads=4)
    status, _, err = check("--previous", str(before))
    assert status == 1 and "redis@7.2.4: 4 downloads, fewer than the 9 of the earlier run" in err


def test_it_refuses_a_previous_report_it_cannot_read(published: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"problems": []}')
    with pytest.raises(CommandError, match="not a report of `check_integrity --json`"):
        call_command("check_integrity", "--previous", str(bad), stdout=io.StringIO())
