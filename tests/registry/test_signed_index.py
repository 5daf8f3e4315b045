"""The registry as a TUF repository (SPEC 6.1, registry.trust), in-process: what `trust init`
signs, what a publish, yank and unyank re-sign (a constant number of files), a crash between
storing metadata and committing, key rotation and expiry, and the /tuf/ views. A real
`tuf.ngclient.Updater` reads the repository through the Django test client."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from tuf.api import exceptions as tuf_errors
from tuf.api.metadata import Metadata, Snapshot, Targets
from tuf.ngclient import Updater
from tuf.ngclient.fetcher import FetcherInterface

from registry import services, storage
from registry.models import Extension, Version
from registry.tokens import Actor
from registry.trust import repository
from registry.trust.integrity import check_integrity
from registry.trust.models import TrustRole, TrustTarget

pytest_plugins = ["tests.factories"]


class DjangoFetcher(FetcherInterface):
    """ngclient's downloads through the Django test client."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def _fetch(self, url: str) -> Iterator[bytes]:
        response = self.client.get(url.removeprefix("http://testserver"))
        if response.status_code != 200:
            raise tuf_errors.DownloadHTTPError(f"{url}: {response.status_code}", response.status_code)
        body = b"".join(response.streaming_content) if response.streaming else response.content  # type: ignore[attr-defined]
        return iter([body])


def make_updater(client: Client, folder: Path, *, root: bytes | None = None) -> Updater:
    folder.mkdir(parents=True, exist_ok=True)
    if root is None and not (folder / "root.json").exists():
        root = storage.read_small(repository.metadata_key("root", 1))
    updater = Updater(
        metadata_dir=str(folder),
        metadata_base_url="http://testserver/tuf/metadata/",
        target_base_url="http://testserver/tuf/targets/",
        fetcher=DjangoFetcher(client),
        bootstrap=root,
    )
    updater.refresh()
    return updater


@pytest.fixture
def signed(db: None, settings: Any, private_storage: Path, tmp_path: Path) -> Path:
    """A signed index (16 bins) in private storage, with its keys under tmp_path; the root key's folder."""
    settings.REGISTRY_TUF_KEYS_DIR = tmp_path / "keys"
    root_dir = tmp_path / "root"
    with transaction.atomic():
        repository.init(root_key_dir=root_dir, bit_length=4)
    return root_dir


def _versions() -> dict[str, int]:
    return dict(TrustRole.objects.exclude(name=repository.LOCK).values_list("name", "version"))


def test_trust_init_signs_every_target_of_the_catalogue(
    db: None, settings: Any, private_storage: Path, tmp_path: Path, publisher: Any, client: Client
) -> None:
    publisher("etcd", "3.5.9")
    publisher("etcd", "3.5.12")
    settings.REGISTRY_TUF_KEYS_DIR = tmp_path / "keys"
    with transaction.atomic():
        done = repository.init(root_key_dir=tmp_path / "root", bit_length=4)
    # the index document, two packages, their two provenance statements and the provenance key
    assert done.targets == 6 and done.bins == 16
    assert done.root_key.parent == tmp_path / "root" and oct(done.root_key.stat().st_mode & 0o777) == "0o600"
    assert not done.root_key.is_relative_to(tmp_path / "keys")  # the root key is kept apart
    assert check_integrity() == []
    updater = make_updater(client, tmp_path / "client")
    etcd = Extension.objects.get(name="etcd")
    info = updater.get_targetinfo("index/etcd.json")
    assert info is not None and info.hashes["sha256"] == etcd.index_etag
    package = updater.get_targetinfo("packages/etcd/etcd-3.5.12.tar.gz")
    assert package is not None
    assert package.hashes["sha256"] == Version.objects.get(extension=etcd, version="3.5.12").sha256
    downloaded = updater.download_target(info, str(tmp_path / "etcd.json"))
    assert Path(downloaded).read_text() == etcd.index_json
    with pytest.raises(repository.TrustError, match="already initialized"), transaction.atomic():
        repository.init(root_key_dir=tmp_path / "root2")


def test_a_publish_and_a_yank_re_sign_one_or_two_bins_the_snapshot_and_the_timestamp(
    signed: Path, publisher: Any, client: Client, tmp_path: Path
) -> None:
    for index in range(12):
        publisher(f"filler{index}", "1.0.0")
    before = _versions()
    publisher("etcd", "3.5.9")
    after = _versions()
    changed = sorted(name for name in after if after[name] != before.get(name))
    bins = [name for name in changed if name.startswith("bin-")]
    # the bins of the index document, the package and its provenance
    assert {"snapshot", "timestamp"} <= set(changed) and 1 <= len(bins) <= 3, changed
    assert len(changed) == len(bins) + 2  # never root, targets or the other bins
    assert after["snapshot"] == before["snapshot"] + 1 and after["timestamp"] == before["timestamp"] + 1

    etcd = Extension.objects.get(name="etcd")
    alice = etcd.owners.get()
    before = _versions()
    services.version_yank(actor=Actor(user=alice), name="etcd", version="3.5.9", reason="broken")
    after = _versions()
    changed = sorted(name for name in after if after[name] != before.get(name))
    index_bin = TrustTarget.objects.get(path="index/etcd.json").role
    assert changed == sorted([index_bin, "snapshot", "timestamp"])  # the package's target is unchanged
    assert check_integrity() == []
    updater = make_updater(client, tmp_path / "client")
    info = updater.get_targetinfo("index/etcd.json")
    assert info is not None
    document = json.loads(Path(updater.download_target(info, str(tmp_path / "doc.json"))).read_text())
    assert document["versions"][0]["yanked"] is True


def test_every_stored_name_but_the_timestamp_is_written_once(
    signed: Path, publisher: Any, private_storage: Path
) -> None:
    publisher("etcd", "3.5.9")
    first = {p.name: p.read_bytes() for p in (private_storage / "tuf" / "metadata").iterdir()}
    publisher("etcd", "3.5.12")
    publisher("redis", "7.2.4")
    later = {p.name: p.read_bytes() for p in (private_storage / "tuf" / "metadata").iterdir()}
    changed = sorted(name for name in first if later[name] != first[name])
    assert changed == ["timestamp.json"]
    assert len(later) > len(first)


def test_a_crash_between_storing_metadata_and_committing_is_repaired_by_the_sweeper(
    signed: Path, publisher: Any, client: Client, tmp_path: Path
) -> None:
    from builds.sweeper import sweep

    publisher("etcd", "3.5.9")
    committed = _versions()
    etcd = Extension.objects.get(name="etcd")
    alice = etcd.owners.get()

    class Crash(Exception):
        pass

    seen = tmp_path / "client"
    make_updater(client, seen)  # this client trusts the committed state
    with pytest.raises(Crash), transaction.atomic():
        services.version_yank(actor=Actor(user=alice), name="etcd", version="3.5.9", reason="lost")
        # The metadata is stored (a reader now sees the yanked document signed) ...
        updater = make_updater(client, seen)
        info = updater.get_targetinfo("index/etcd.json")
        assert info is not None and info.hashes["sha256"] != etcd.index_etag
        raise Crash  # ... and the process dies before the commit
    assert _versions() == committed  # the rows say what the repository must be
    problems = check_integrity()
    assert any("timestamp.json is not the committed one" in p for p in problems), problems
    sweep(grace_seconds=3600)
    assert check_integrity() == []
    # The client that saw the lost write moves on without a rollback error, back to the committed document.
    updater = make_updater(client, seen)
    info = updater.get_targetinfo("index/etcd.json")
    assert info is not None and info.hashes["sha256"] == Extension.objects.get(name="etcd").index_etag
    stored = Metadata[Snapshot].from_bytes(
        storage.read_small(repository.metadata_key("snapshot", _versions()["snapshot"])) or b""
    )
    assert stored.signed.version > committed["snapshot"] + 1  # above the lost write's version


def test_the_next_publish_after_a_lost_write_goes_above_its_versions(
    signed: Path, publisher: Any, client: Client, tmp_path: Path
) -> None:
    publisher("etcd", "3.5.9")
    alice = Extension.objects.get(name="etcd").owners.get()
    seen = tmp_path / "client"
    with pytest.raises(RuntimeError), transaction.atomic():
        services.version_yank(actor=Actor(user=alice), name="etcd", version="3.5.9", reason="lost")
        make_updater(client, seen)
        raise RuntimeError("crash")
    publisher("redis", "7.2.4")  # no sweeper in between: the writer repairs first
    assert check_integrity() == []
    updater = make_updater(client, seen)
    assert updater.get_targetinfo("packages/redis/redis-7.2.4.tar.gz") is not None


def test_files_a_crash_lost_are_written_again_by_maintain(
    signed: Path, publisher: Any, client: Client, tmp_path: Path, private_storage: Path
) -> None:
    publisher("etcd", "3.5.9")
    seen = tmp_path / "client"
    make_updater(client, seen)
    versions = _versions()
    etcd = Extension.objects.get(name="etcd")
    index_bin = TrustTarget.objects.get(path="index/etcd.json").role
    metadata = private_storage / "tuf" / "metadata"
    (metadata / f"{versions[index_bin]}.{index_bin}.json").unlink()
    (metadata / f"{versions['snapshot']}.snapshot.json").write_bytes(b"")  # flushed as empty
    (metadata / "timestamp.json").unlink()
    (private_storage / "tuf" / "targets" / "index" / f"{etcd.index_etag}.etcd.json").unlink()
    problems = check_integrity()
    assert len(problems) >= 4, problems
    written = repository.maintain()
    assert {index_bin, "snapshot", "timestamp"} <= set(written)
    assert check_integrity() == []
    updater = make_updater(client, seen)  # the client that saw the lost versions moves on
    info = updater.get_targetinfo("index/etcd.json")
    assert info is not None
    assert Path(updater.download_target(info, str(tmp_path / "doc.json"))).read_text() == etcd.index_json


def test_rotating_every_role_keeps_clients_following(
    signed: Path, publisher: Any, client: Client, tmp_path: Path, settings: Any
) -> None:
    publisher("etcd", "3.5.9")
    seen = tmp_path / "client"
    make_updater(client, seen)
    root_keys = sorted(signed.glob("*.pem"))
    for role in ("timestamp", "snapshot", "targets", "root"):
        old_keys = sorted((Path(settings.REGISTRY_TUF_KEYS_DIR) / role).glob("*.pem")) if role != "root" else []
        done = repository.rotate(role, root_keys=sorted(signed.glob("*.pem")))
        assert all(not path.exists() for path in old_keys)
        assert check_integrity() == [], role
        updater = make_updater(client, seen)
        assert updater.get_targetinfo("packages/etcd/etcd-3.5.9.tar.gz") is not None
    assert done.root_version == 5
    assert json.loads((seen / "root.json").read_text())["signed"]["version"] == 5
    publisher("etcd", "3.5.12")  # signed with the new keys
    assert make_updater(client, seen).get_targetinfo("packages/etcd/etcd-3.5.12.tar.gz") is not None
    with pytest.raises(repository.TrustError, match="root key"):
        repository.rotate("timestamp", root_keys=root_keys)  # the first root key no longer signs roots


def test_the_timestamp_is_re_signed_once_half_its_lifetime_is_over(signed: Path, settings: Any, client: Client) -> None:
    assert repository.maintain() == []  # nothing is due
    row = TrustRole.objects.get(name="timestamp")
    TrustRole.objects.filter(name="timestamp").update(expires=row.expires - repository.lifetime("timestamp") * 0.6)
    settings.CELERY_TASK_ALWAYS_EAGER = True
    response = client.get("/tuf/metadata/timestamp.json")  # embedded mode: re-signed on the request
    assert response.status_code == 200
    served = json.loads(b"".join(response.streaming_content))  # type: ignore[attr-defined]
    assert served["signed"]["version"] == row.version + 1
    assert TrustRole.objects.get(name="timestamp").version == row.version + 1
    assert check_integrity() == []


def test_the_views_serve_immutable_names_and_refuse_everything_else(
    signed: Path, publisher: Any, client: Client
) -> None:
    publisher("etcd", "3.5.9")
    root = client.get("/tuf/metadata/1.root.json")
    assert root.status_code == 200 and "immutable" in root["Cache-Control"]
    timestamp = client.get("/tuf/metadata/timestamp.json")
    assert timestamp.status_code == 200 and "must-revalidate" in timestamp["Cache-Control"]
    version = Version.objects.get(version="3.5.9")
    package = client.get(f"/tuf/targets/packages/etcd/{version.sha256}.etcd-3.5.9.tar.gz")
    assert package.status_code == 200
    assert hashlib.sha256(b"".join(package.streaming_content)).hexdigest() == version.sha256  # type: ignore[attr-defined]
    etag = Extension.objects.get(name="etcd").index_etag
    assert client.get(f"/tuf/targets/index/{etag}.etcd.json").status_code == 200
    for path in (
        "/tuf/metadata/../settings.py",
        "/tuf/metadata/0.root.json",
        "/tuf/metadata/root.json.bak",
        f"/tuf/targets/packages/etcd/{'0' * 64}.etcd-3.5.9.tar.gz",
        f"/tuf/targets/packages/other/{version.sha256}.other-1.0.0.tar.gz",
        "/tuf/targets/index/etcd.json",
        "/tuf/targets/../../registry.sqlite3",
    ):
        assert client.get(path).status_code == 404, path
    assert client.post("/tuf/metadata/timestamp.json").status_code == 405
    # A package file damaged on the disk is not sent under the signed target's name.
    with open(storage.file_path(version.storage_key), "r+b") as handle:
        handle.truncate(version.size // 2)
    damaged = client.get(f"/tuf/targets/packages/etcd/{version.sha256}.etcd-3.5.9.tar.gz")
    assert (damaged.status_code, damaged.content) == (503, b"storage unavailable\n")


def test_bins_list_exactly_their_targets(signed: Path, publisher: Any) -> None:
    publisher("etcd", "3.5.9")
    for row in TrustRole.objects.filter(name__startswith="bin-"):
        data = storage.read_small(repository.metadata_key(row.name, row.version))
        assert data is not None
        listed = Metadata[Targets].from_bytes(data).signed.targets
        assert set(listed) == set(TrustTarget.objects.filter(role=row.name).values_list("path", flat=True))


def test_without_a_signed_index_publishing_works_and_nothing_is_served(publisher: Any, client: Client) -> None:
    publisher("etcd", "3.5.9")
    assert not repository.initialized()
    assert client.get("/tuf/metadata/1.root.json").status_code == 404
    assert check_integrity() == ["the signed index is not initialized: run `python manage.py trust init`"]


@pytest.mark.s3
def test_the_signed_index_lives_in_s3_too(
    db: None, settings: Any, s3_storage: Any, tmp_path: Path, publisher: Any, client: Client
) -> None:
    settings.REGISTRY_TUF_KEYS_DIR = tmp_path / "keys"
    with transaction.atomic():
        repository.init(root_key_dir=tmp_path / "root", bit_length=4)
    publisher("etcd", "3.5.9")
    publisher("etcd", "3.5.12")  # timestamp.json replaced in the bucket each time
    assert check_integrity() == []
    stored = s3_storage.client.get_object(Bucket=s3_storage.name, Key="packages/tuf/metadata/timestamp.json")
    assert json.loads(stored["Body"].read())["signed"]["version"] == _versions()["timestamp"]
    updater = make_updater(client, tmp_path / "client")
    info = updater.get_targetinfo("packages/etcd/etcd-3.5.12.tar.gz")
    assert info is not None
    redirect = client.get(f"/tuf/targets/packages/etcd/{info.hashes['sha256']}.etcd-3.5.12.tar.gz")
    assert redirect.status_code == 302  # package targets are presigned URLs, as downloads are
    assert updater.get_targetinfo("index/etcd.json") is not None


def test_the_trust_command_initialises_shows_checks_and_rotates(
    db: None, settings: Any, private_storage: Path, tmp_path: Path, publisher: Any
) -> None:
    from io import StringIO

    from django.core.management import CommandError, call_command

    settings.REGISTRY_TUF_KEYS_DIR = tmp_path / "keys"
    publisher("etcd", "3.5.9")
    out = StringIO()
    call_command("trust", "init", "--root-key-dir", str(tmp_path / "offline"), "--bins", "16",
                 "--threshold", "targets=2", stdout=out)  # fmt: skip
    text = out.getvalue()
    root_key = next((tmp_path / "offline").glob("root-*.pem"))
    assert f"root key written to {root_key}" in text and "Move it offline" in text
    assert len(list((tmp_path / "keys" / "targets").glob("*.pem"))) == 2
    fingerprint = hashlib.sha256(storage.read_small(repository.metadata_key("root", 1)) or b"").hexdigest()
    assert f"sha256:{fingerprint}" in text
    again = StringIO()
    call_command("trust", "init", "--if-missing", stdout=again)
    assert "already initialized" in again.getvalue()
    with pytest.raises(CommandError, match="already initialized"):
        call_command("trust", "init", "--root-key-dir", str(tmp_path / "other"))
    shown = StringIO()
    call_command("trust", "show", stdout=shown)
    assert f"sha256:{fingerprint}" in shown.getvalue() and "threshold 2 of" in shown.getvalue()
    checked = StringIO()
    call_command("trust", "check", stdout=checked)
    assert "agree" in checked.getvalue()
    TrustTarget.objects.filter(path="index/etcd.json").update(sha256="0" * 64)
    with pytest.raises(CommandError, match="problem"):
        call_command("trust", "check", stderr=StringIO())
    with pytest.raises(CommandError, match="--root-key"):
        call_command(
            "trust", "rotate", "timestamp", "--root-key", str(next((tmp_path / "keys" / "snapshot").glob("*.pem")))
        )
    for bad, why in (
        (["--bins", "3"], "power of 2"),
        (["--threshold", "root=2"], "ROLE=N"),
        (["--threshold", "targets=x"], "ROLE=N"),
    ):
        with pytest.raises(CommandError, match=why):
            call_command("trust", "init", "--root-key-dir", str(tmp_path / "x"), *bad)
