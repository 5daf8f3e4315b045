"""The static index (registry.staticindex): every publish, yank and unyank also writes the index
document as index/NAME in package storage, after the commit, with exactly the bytes the API
serves; a write lost to a crash or an outage is repaired from the row."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from django.db import transaction
from django.test import Client

from registry import background, services, staticindex, storage
from registry.errors import StorageUnavailable
from registry.models import Extension
from registry.tokens import Actor

if TYPE_CHECKING:
    from tests.factories import Publisher

pytest_plugins = ["tests.factories"]


def served(client: Client, name: str) -> bytes:
    response = client.get(f"/api/v1/index/{name}")
    assert response.status_code == 200
    return response.content


def static(storage_dir: Path, name: str) -> bytes | None:
    path = storage_dir / "index" / name
    return path.read_bytes() if path.exists() else None


def test_publish_yank_and_unyank_write_the_document_the_api_serves(
    client: Client, publisher: Publisher, private_storage: Path, user: Any
) -> None:
    publisher("etcd", "3.5.9")
    assert static(private_storage, "etcd") == served(client, "etcd")
    publisher("etcd", "3.5.12")
    assert b'"3.5.12"' in served(client, "etcd")
    assert static(private_storage, "etcd") == served(client, "etcd")
    from tests.factories import autocommit_hooks

    with autocommit_hooks():
        services.version_yank(actor=Actor(user=user), name="etcd", version="3.5.12", reason="broken")
    with_yank = served(client, "etcd")
    assert static(private_storage, "etcd") == with_yank
    with autocommit_hooks():
        services.version_unyank(actor=Actor(user=user), name="etcd", version="3.5.12")
    assert static(private_storage, "etcd") == served(client, "etcd") != with_yank
    assert os.stat(private_storage / "index" / "etcd").st_mode & 0o777 == 0o644  # nginx can read it


def test_nothing_is_written_before_the_commit_nor_for_a_rolled_back_change(
    publisher: Publisher, private_storage: Path
) -> None:
    publisher("etcd", "3.5.9")
    before = static(private_storage, "etcd")
    extension = Extension.objects.get(name="etcd")
    with pytest.raises(RuntimeError), transaction.atomic():
        extension.index_json = '{"name":"etcd","versions":[]}'
        extension.save(update_fields=["index_json"])
        staticindex.static_index_refresh(extension)
        assert static(private_storage, "etcd") == before  # not yet: the transaction is open
        raise RuntimeError("the change fails")
    assert static(private_storage, "etcd") == before


def test_a_write_lost_after_the_commit_is_repaired_from_the_row(
    client: Client, publisher: Publisher, private_storage: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    publisher("etcd", "3.5.9")
    with monkeypatch.context() as patched:

        def down(*args: Any, **kwargs: Any) -> None:
            raise StorageUnavailable()

        patched.setattr(storage, "replace", down)
        build = publisher("etcd", "3.5.12")  # the publish itself succeeds: the row is the truth
    assert build["status"] == "succeeded"
    assert static(private_storage, "etcd") != served(client, "etcd")
    assert staticindex.static_index_repair() == 1
    assert static(private_storage, "etcd") == served(client, "etcd")
    assert staticindex.static_index_repair() == 0  # in step: nothing to write


def test_the_background_pass_repairs_recent_changes_and_everything_on_its_first_pass(
    client: Client, publisher: Publisher, private_storage: Path
) -> None:
    publisher("etcd", "3.5.9")
    publisher("redis", "7.2.4")
    (private_storage / "index" / "etcd").write_bytes(b"torn")
    (private_storage / "index" / "redis").unlink()
    Extension.objects.filter(name="redis").update(updated_at="2000-01-01T00:00:00Z")  # changed long ago
    background.run_pass(first=False)
    assert static(private_storage, "etcd") == served(client, "etcd")  # recent: repaired
    assert static(private_storage, "redis") is None  # old: left for the first pass or the sweep
    background.run_pass(first=True)
    assert static(private_storage, "redis") == served(client, "redis")


def test_the_sweep_repairs_every_file_and_removes_leftovers(
    client: Client, publisher: Publisher, private_storage: Path
) -> None:
    from builds.sweeper import sweep

    publisher("etcd", "3.5.9")
    (private_storage / "index" / "etcd").write_bytes(b"{}")
    leftover = private_storage / "index" / ".incoming-abc"
    leftover.write_bytes(b"half")
    old = time.time() - 7200
    os.utime(leftover, (old, old))
    result = sweep(grace_seconds=3600)
    assert result["static_index"] == 1
    assert static(private_storage, "etcd") == served(client, "etcd")
    assert not leftover.exists()


def test_it_can_be_turned_off(publisher: Publisher, private_storage: Path, settings: Any) -> None:
    settings.REGISTRY_STATIC_INDEX = False
    publisher("etcd", "3.5.9")
    assert static(private_storage, "etcd") is None
    assert staticindex.static_index_repair() == 0


@pytest.mark.s3
def test_with_s3_the_document_is_an_object_of_type_json(client: Client, publisher: Publisher, s3_storage: Any) -> None:
    publisher("etcd", "3.5.9")
    obj = s3_storage.client.get_object(Bucket=s3_storage.name, Key=f"{s3_storage.location}/index/etcd")
    assert obj["ContentType"] == "application/json"
    assert obj["Body"].read() == served(client, "etcd")
    assert staticindex.static_index_repair() == 0
