"""Inspecting and extracting packages: every hostile archive is refused with the right error and
nothing is written outside a private temporary directory; valid packages round-trip."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import subprocess
import tarfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from extensions.archive import (
    README_MAX_BYTES,
    Limits,
    PackageInfo,
    build_package,
    extract_source_archive,
    inspect_package,
    safe_extract,
)
from extensions.errors import ArchiveError, ArchiveTooLargeError, ExtensionError, ManifestError
from tests.extensions.test_archive_build import FILES, make_source, toml, write_tree
from tests.hostile_archives import (
    ABSOLUTE_TARGETS,
    ALL_HOSTILE,
    BASE_FILES,
    SOURCE_HOSTILE,
    TOP,
    Hostile,
    dir_entry,
    file_entry,
    gz,
    gzip_bomb_declared,
    gzip_bomb_hidden,
    huge_pax_header,
    manifest_json,
    package_bytes,
    tar_bytes,
    too_many_distinct_members,
)


def case_id(make: Callable[[], Hostile]) -> str:
    return make.__name__


def tree(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path below ``root`` with its type, size and mtime (symlinks not followed)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            st = path.lstat()
            out[path.relative_to(root).as_posix()] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns)
    return out


class Unseekable(io.RawIOBase):
    """A stream that can only be read forward, like an HTTP upload."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        chunk = self._data.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


def assert_refused(error: BaseException, case: Hostile) -> None:
    assert type(error).__name__ == case.error, f"{case.name}: {type(error).__name__}: {error}"
    assert isinstance(error, ExtensionError)
    assert error.code == case.code
    if case.member is not None:
        assert case.member in str(error), f"{case.name}: the message does not name {case.member!r}: {error}"
    assert "allowed" in str(error)


# --------------------------------------------------------------------------------------------------
# Hostile archives


@pytest.mark.parametrize("make", ALL_HOSTILE, ids=case_id)
def test_inspection_refuses_the_hostile_archive(make: Callable[[], Hostile]) -> None:
    case = make()
    with pytest.raises(ExtensionError) as info:
        inspect_package(io.BytesIO(case.data))
    assert_refused(info.value, case)


@pytest.mark.parametrize("make", ALL_HOSTILE, ids=case_id)
def test_extraction_refuses_the_hostile_archive_and_writes_nothing(make: Callable[[], Hostile], tmp_path: Path) -> None:
    case = make()
    (tmp_path / "marker").write_text("present before\n")
    before, parent_before = tree(tmp_path), sorted(os.listdir(tmp_path.parent))
    with pytest.raises(ExtensionError) as info:
        safe_extract(io.BytesIO(case.data), tmp_path / "out")
    assert_refused(info.value, case)
    assert tree(tmp_path) == before  # no `out`, no `.extract-*`, no `x-dotdot`, nothing
    assert sorted(os.listdir(tmp_path.parent)) == parent_before
    for target in ABSOLUTE_TARGETS:
        assert not os.path.lexists(target)


@pytest.mark.parametrize("make", SOURCE_HOSTILE, ids=case_id)
def test_source_extraction_refuses_the_hostile_archive_and_writes_nothing(
    make: Callable[[], Hostile], tmp_path: Path
) -> None:
    case = make()
    before, parent_before = tree(tmp_path), sorted(os.listdir(tmp_path.parent))
    with pytest.raises(ExtensionError) as info:
        extract_source_archive(io.BytesIO(case.data), tmp_path / "src")
    assert_refused(info.value, case)
    assert tree(tmp_path) == before
    assert sorted(os.listdir(tmp_path.parent)) == parent_before


def test_inspection_counts_every_distinct_member() -> None:
    case = too_many_distinct_members()
    with pytest.raises(ArchiveTooLargeError) as info:
        inspect_package(io.BytesIO(case.data))
    assert_refused(info.value, case)
    assert info.value.limit == "max_members"


@pytest.mark.parametrize("make", [gzip_bomb_hidden, gzip_bomb_declared, huge_pax_header], ids=case_id)
def test_a_gzip_bomb_is_stopped_with_bounded_memory(make: Callable[[], Hostile]) -> None:
    case = make()
    tracemalloc.start()
    try:
        with pytest.raises(ArchiveTooLargeError) as info:
            inspect_package(io.BytesIO(case.data))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.limit in ("max_unpacked_bytes", "max_path_bytes")
    assert peak < 16 * 1024 * 1024  # the input itself is ~1 MB; decompressing it gives 1 GiB


def test_a_member_over_the_unpacked_limit_is_refused_by_what_is_read_not_what_is_claimed() -> None:
    # A header that honestly claims 3 MiB, under a 2 MiB limit: refused before its data is read...
    data = package_bytes(extra=[file_entry(f"{TOP}/big.bin", bytes(3 << 20))])
    with pytest.raises(ArchiveTooLargeError) as info:
        inspect_package(io.BytesIO(data), limits=Limits(max_unpacked_bytes=2 << 20))
    assert info.value.path == f"{TOP}/big.bin"
    # ...and many small members that add up are refused at the one that crosses the limit.
    extra = [file_entry(f"{TOP}/part{i}.bin", bytes(600 << 10)) for i in range(4)]
    with pytest.raises(ArchiveTooLargeError) as info:
        inspect_package(io.BytesIO(package_bytes(extra=extra)), limits=Limits(max_unpacked_bytes=2 << 20))
    assert info.value.path == f"{TOP}/part3.bin"


def test_the_compressed_limit_counts_the_bytes_read() -> None:
    data = package_bytes(dict(BASE_FILES, **{"noise.bin": os.urandom(64 << 10)}))
    with pytest.raises(ArchiveTooLargeError) as info:
        inspect_package(io.BytesIO(data), limits=Limits(max_package_bytes=32 << 10))
    assert info.value.limit == "max_package_bytes"
    assert inspect_package(io.BytesIO(data), limits=Limits(max_package_bytes=len(data))).size == len(data)


def test_an_invalid_extension_toml_raises_the_manifest_error() -> None:
    files = dict(BASE_FILES, **{"extension.toml": b'[extension]\nname = "demo"\nversion = "1.0"\n'})
    with pytest.raises(ManifestError) as info:
        inspect_package(io.BytesIO(package_bytes(files)))
    assert info.value.code == "invalid_manifest"


def test_extraction_refuses_an_existing_destination(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    with pytest.raises(FileExistsError):
        safe_extract(io.BytesIO(package_bytes()), tmp_path / "out")
    assert os.listdir(tmp_path / "out") == []
    assert sorted(os.listdir(tmp_path)) == ["out"]


# --------------------------------------------------------------------------------------------------
# Valid packages


def test_a_package_round_trips_build_inspect_extract(tmp_path: Path) -> None:
    source = make_source(tmp_path / "src", extra={"bin/run.sh": "#!/bin/sh\necho hi\n"})
    os.chmod(source / "bin" / "run.sh", 0o755)  # noqa: S103
    built = build_package(source, tmp_path / "dist")
    info = inspect_package(built.path)
    assert isinstance(info, PackageInfo)
    assert (info.name, info.version) == ("demo", "1.0.0")
    assert (info.sha256, info.size) == (built.sha256, built.size)
    assert info.files == built.files
    assert info.manifest_text == (source / "extension.toml").read_text()
    assert info.readme_text == FILES["README.md"]
    with tarfile.open(built.path) as tar:
        manifest_member = tar.extractfile(f"{TOP}/MANIFEST.json")
        assert manifest_member is not None
        manifest_size = len(manifest_member.read())
    assert info.unpacked_size == sum(f.size for f in built.files) + manifest_size

    extracted = safe_extract(built.path, tmp_path / "installed" / "demo")
    assert extracted == info
    dest = tmp_path / "installed" / "demo"
    for entry in built.files:
        assert (dest / entry.path).read_bytes() == (source / entry.path).read_bytes()
        assert hashlib.sha256((dest / entry.path).read_bytes()).hexdigest() == entry.sha256
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == sorted(
        [f.path for f in built.files] + ["MANIFEST.json"]
    )
    assert stat.S_IMODE((dest / "bin" / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((dest / "README.md").stat().st_mode) == 0o644
    assert stat.S_IMODE((dest / "kcl").stat().st_mode) == 0o755
    assert sorted(os.listdir(tmp_path / "installed")) == ["demo"]  # the temporary directory is gone


def test_inspection_reads_paths_seekable_and_unseekable_streams_alike(tmp_path: Path) -> None:
    built = build_package(make_source(tmp_path / "src"), tmp_path / "dist")
    data = built.path.read_bytes()
    from_path = inspect_package(built.path)
    prefixed = io.BytesIO(b"ignored prefix" + data)
    prefixed.seek(len(b"ignored prefix"))
    assert inspect_package(prefixed) == from_path
    assert inspect_package(Unseekable(data)) == from_path  # type: ignore[arg-type]
    assert safe_extract(Unseekable(data), tmp_path / "out") == from_path  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["path", "bytesio", "unseekable"])
def test_the_readme_named_by_the_manifest_is_found_even_before_extension_toml(tmp_path: Path, kind: str) -> None:
    # docs/guide.md sorts before extension.toml, so a single pass meets it before knowing it is the README.
    files: dict[str, str | bytes] = {
        "extension.toml": toml(readme="docs/guide.md"),
        "docs/guide.md": "# The guide is the README\n",
        "README.md": "# not this one\n",
    }
    built = build_package(write_tree(tmp_path / "src", files), tmp_path / "dist")
    data = built.path.read_bytes()
    source = {"path": built.path, "bytesio": io.BytesIO(data), "unseekable": Unseekable(data)}[kind]
    info = inspect_package(source)  # type: ignore[arg-type]
    assert info.readme_text == "# The guide is the README\n"
    assert safe_extract(io.BytesIO(data), tmp_path / "out").readme_text == "# The guide is the README\n"


def test_a_long_readme_is_truncated_at_one_mebibyte_on_a_character_boundary(tmp_path: Path) -> None:
    text = "# Long\n" + "é" * README_MAX_BYTES  # 2 bytes per character: the cut falls inside one
    built = build_package(write_tree(tmp_path / "src", {"extension.toml": toml(), "README.md": text}), tmp_path / "d")
    info = inspect_package(built.path)
    assert info.readme_text is not None
    assert text.startswith(info.readme_text)
    assert README_MAX_BYTES - 2 < len(info.readme_text.encode()) <= README_MAX_BYTES
    assert safe_extract(built.path, tmp_path / "out").readme_text == info.readme_text


def test_a_package_made_by_another_tar_is_accepted(tmp_path: Path) -> None:
    tar = shutil.which("tar")
    if tar is None:
        pytest.skip("no tar on PATH")
    built = build_package(make_source(tmp_path / "src"), tmp_path / "dist")
    safe_extract(built.path, tmp_path / "unpacked" / TOP)
    other = tmp_path / "other.tar.gz"
    subprocess.run([tar, "czf", os.fspath(other), "-C", os.fspath(tmp_path / "unpacked"), TOP], check=True)
    info = inspect_package(other)
    assert info.files == built.files
    assert info.sha256 != built.sha256


def test_extraction_creates_missing_parent_directories(tmp_path: Path) -> None:
    info = safe_extract(io.BytesIO(package_bytes()), tmp_path / "a" / "b" / "demo")
    assert (tmp_path / "a" / "b" / "demo" / "extension.toml").read_bytes() == BASE_FILES["extension.toml"]
    assert info.name == "demo"
    assert os.listdir(tmp_path / "a" / "b") == ["demo"]


def test_extraction_accepts_a_package_without_directory_members() -> None:
    entries = [file_entry(f"{TOP}/{p}", d) for p, d in sorted(BASE_FILES.items())]
    entries.append(file_entry(f"{TOP}/MANIFEST.json", manifest_json(BASE_FILES)))
    info = inspect_package(io.BytesIO(gz(tar_bytes(entries))))
    assert [f.path for f in info.files] == ["README.md", "extension.toml", "kcl/demo.k"]


# --------------------------------------------------------------------------------------------------
# Source archives


def _source_tarball(files: dict[str, bytes], *, prefix: str = "") -> bytes:
    dirs = {prefix.rstrip("/")} if prefix else set()
    entries = [dir_entry(d) for d in sorted(dirs)]
    entries += [file_entry(f"{prefix}{p}", d) for p, d in sorted(files.items())]
    return gz(tar_bytes(entries))


def test_a_source_archive_with_one_top_directory_is_extracted_and_that_directory_returned(tmp_path: Path) -> None:
    data = _source_tarball(dict(BASE_FILES, **{"tests/t.nu": b"ok\n"}), prefix="my-ext/")
    root = extract_source_archive(io.BytesIO(data), tmp_path / "build")
    assert root == tmp_path / "build" / "my-ext"
    assert (root / "extension.toml").read_bytes() == BASE_FILES["extension.toml"]
    assert (root / "tests" / "t.nu").read_bytes() == b"ok\n"
    assert sorted(os.listdir(tmp_path)) == ["build"]
    assert stat.S_IMODE((tmp_path / "build").stat().st_mode) == 0o755


def test_a_source_archive_with_extension_toml_at_the_root_returns_the_destination(tmp_path: Path) -> None:
    root = extract_source_archive(io.BytesIO(_source_tarball(BASE_FILES)), tmp_path / "build")
    assert root == tmp_path / "build"
    assert (root / "kcl" / "demo.k").read_bytes() == BASE_FILES["kcl/demo.k"]


def test_a_source_archive_made_with_tar_dot_is_accepted(tmp_path: Path) -> None:
    tar = shutil.which("tar")
    if tar is None:
        pytest.skip("no tar on PATH")
    source = make_source(tmp_path / "src")
    archive = tmp_path / "source.tar.gz"
    subprocess.run([tar, "czf", os.fspath(archive), "-C", os.fspath(source), "."], check=True)
    root = extract_source_archive(archive, tmp_path / "build")
    assert root == tmp_path / "build"
    assert (root / "extension.toml").read_text() == (source / "extension.toml").read_text()
    built = build_package(root, tmp_path / "dist")
    assert built.sha256 == build_package(source, tmp_path / "dist2").sha256


def test_a_source_archive_without_extension_toml_is_refused(tmp_path: Path) -> None:
    files = {"README.md": b"# x\n", "kcl/demo.k": b"x = 1\n"}
    for data in (_source_tarball(files), _source_tarball(files, prefix="top/")):
        with pytest.raises(ArchiveError) as info:
            extract_source_archive(io.BytesIO(data), tmp_path / "build")
        assert info.value.code == "invalid_archive"
        assert "extension.toml" in str(info.value)
        assert os.listdir(tmp_path) == []


def test_a_source_archive_with_two_top_directories_needs_extension_toml_at_the_root(tmp_path: Path) -> None:
    data = gz(
        tar_bytes(
            [
                file_entry("a/extension.toml", BASE_FILES["extension.toml"]),
                file_entry("b/README.md", b"# b\n"),
            ]
        )
    )
    with pytest.raises(ArchiveError):
        extract_source_archive(io.BytesIO(data), tmp_path / "build")
    assert os.listdir(tmp_path) == []
