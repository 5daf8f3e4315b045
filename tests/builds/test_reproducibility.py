"""Reproducibility checked by the registry (issue 12): a source build is reproducible by
construction; an uploaded package is rebuilt from its own files with the registry's builder and
marked reproducible only when the bytes are identical, with the reason when they are not."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.test import Client

from extensions.archive import build_package
from extensions.graph import dependency_order
from extensions.manifest import load_manifest
from registry.models import Version

pytest_plugins = ["tests.factories"]
REPO = Path(__file__).resolve().parents[2]


def published(client: Client, token: str, data: bytes, url: str = "/api/v1/extensions/", field: str = "file") -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.factories import autocommit_hooks

    with autocommit_hooks():
        response = client.post(url, {field: SimpleUploadedFile("x.tar.gz", data)}, HTTP_AUTHORIZATION=f"Bearer {token}")
    build = response.json()["data"]
    assert build["status"] == "succeeded", build["error"]
    return Version.objects.get(extension__name=build["name"], version=build["version"])


def repacked(path: Path, *, reverse: bool = False, mtime: int | None = None, level: int = 6) -> bytes:
    """The same files, packed another way (as `tar czf` might)."""
    raw = io.BytesIO()
    with tarfile.open(path) as source, tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as out:
        members = sorted(source.getmembers(), key=lambda m: m.name, reverse=reverse)
        for member in members:
            if mtime is not None and member.isfile():
                member.mtime, mtime = mtime, None  # one file's time, the others' stay 0
            out.addfile(member, source.extractfile(member) if member.isfile() else None)
    return gzip.compress(raw.getvalue(), compresslevel=level, mtime=0)


def test_a_package_built_by_the_builder_is_reproducible(client: Client, token: str, tmp_path: Path) -> None:
    from tests.factories import package

    version = published(client, token, package(tmp_path, "same", "1.0.0").read_bytes())
    assert version.reproducible is True
    assert version.reproducible_note == "rebuilt byte for byte from its own files by the registry's builder"


def test_a_package_built_with_source_date_epoch_is_rebuilt_with_it(
    client: Client, token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.factories import write_extension

    source = write_extension(tmp_path / "src", "dated", "1.0.0")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    path = build_package(source, tmp_path / "dist").path
    assert published(client, token, path.read_bytes()).reproducible is True


@pytest.mark.parametrize(
    ("how", "fragment"),
    [
        ({"reverse": True}, "its members are not in the builder's order (sorted by path)"),
        ({"mtime": 1234}, "has mtime 1234 where the builder writes 0"),
        ({"level": 1}, "the tar or gzip encoding differs"),
    ],
)
def test_a_package_packed_another_way_is_marked_not_reproducible_and_says_why(
    client: Client, token: str, tmp_path: Path, how: dict[str, Any], fragment: str
) -> None:
    from tests.factories import package

    data = repacked(package(tmp_path, "other", "1.0.0"), **how)
    version = published(client, token, data)
    assert version.reproducible is False
    assert fragment in version.reproducible_note, version.reproducible_note
    shown = client.get("/api/v1/extensions/other/versions/1.0.0/").json()["data"]["reproducible"]
    assert shown == {"verified": False, "note": version.reproducible_note}


def test_a_package_holding_files_the_builder_leaves_out_is_not_reproducible(
    client: Client, token: str, tmp_path: Path
) -> None:
    """A .DS_Store listed in MANIFEST.json: a valid package, but not one the builder would make."""
    import hashlib
    import json

    from tests.factories import package

    path = package(tmp_path, "extra", "1.0.0")
    extra = b"Bud1"
    members: list[tuple[tarfile.TarInfo, bytes | None]] = []
    with tarfile.open(path) as source:
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else None  # type: ignore[union-attr]
            if member.name.endswith("/MANIFEST.json"):
                doc = json.loads(data or b"{}")
                doc["files"].append(
                    {"path": ".DS_Store", "size": len(extra), "sha256": hashlib.sha256(extra).hexdigest()}
                )
                doc["files"].sort(key=lambda f: f["path"])
                data = (json.dumps(doc, sort_keys=True, indent=2) + "\n").encode()
                member.size = len(data)
            members.append((member, data))
    store = tarfile.TarInfo("extra-1.0.0/.DS_Store")
    store.size, store.mode = len(extra), 0o644
    members.append((store, extra))
    members.sort(key=lambda item: item[0].name.encode())
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as out:
        for member, data in members:
            out.addfile(member, io.BytesIO(data) if data is not None else None)
    version = published(client, token, gzip.compress(raw.getvalue(), mtime=0))
    assert version.reproducible is False
    assert version.reproducible_note == "it holds `extra-1.0.0/.DS_Store`, which the builder leaves out"


def test_a_source_build_is_reproducible_by_construction(client: Client, token: str, tmp_path: Path) -> None:
    from tests.factories import write_extension

    source = write_extension(tmp_path / "src", "from-source", "1.0.0")
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        tar.add(source, arcname="from-source-1.0.0")
    version = published(client, token, raw.getvalue(), url="/api/v1/builds/", field="source")
    assert version.reproducible is True
    assert version.reproducible_note == "built from its source by the registry's builder"


def _examples() -> list[Path]:
    """Every bundled example version, dependencies first (each name's versions oldest first)."""
    dirs = {p.parent: load_manifest(p.parent) for p in REPO.glob("extensions/*/*/*/extension.toml")}
    needs: dict[str, set[str]] = {}
    for manifest in dirs.values():
        needs.setdefault(manifest.name, set()).update(d.name for d in manifest.dependencies)
    rank = {name: i for i, name in enumerate(dependency_order(needs))}
    return sorted(dirs, key=lambda d: (rank[dirs[d].name], dirs[d].version))


def _source_tarball(directory: Path) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=path.relative_to(directory).as_posix())
    return raw.getvalue()


@pytest.mark.slow
def test_every_bundled_example_built_twice_through_the_api_gives_the_same_bytes(tmp_path: Path) -> None:
    from tests.live_registry import LiveRegistry

    digests: list[dict[str, str]] = []
    for run in ("first", "second"):
        registry = LiveRegistry(tmp_path / run)
        registry.start(workers=1, threads=2)
        try:
            token = registry.createtoken("alice", "publish:*")
            found: dict[str, str] = {}
            with httpx.Client(base_url=registry.url, timeout=120) as http:
                for directory in _examples():
                    response = http.post(
                        "/api/v1/builds/",
                        files={"source": ("src.tar.gz", _source_tarball(directory))},
                        headers={"Authorization": f"Bearer {token}"},
                    )
                    build = response.json()["data"]
                    assert build["status"] == "succeeded", (directory, build["error"])
                    version = http.get(f"/api/v1/extensions/{build['name']}/versions/{build['version']}/").json()
                    found[f"{build['name']}@{build['version']}"] = version["data"]["sha256"]
                    assert version["data"]["reproducible"]["verified"] is True
        finally:
            registry.stop()
        digests.append(found)
    assert digests[0] == digests[1]
    assert len(digests[0]) == len(_examples())
    # and the same bytes as `provisioning extension build` on a laptop
    for directory in _examples():
        manifest = load_manifest(directory)
        local = build_package(directory, tmp_path / "local" / os.urandom(4).hex())
        assert digests[0][f"{manifest.name}@{manifest.version}"] == local.sha256, directory
