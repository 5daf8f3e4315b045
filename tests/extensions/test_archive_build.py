"""Building packages: file selection, reproducible bytes, MANIFEST.json, refusals and limits."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
import tracemalloc
from collections.abc import Iterable
from pathlib import Path

import pytest

from extensions.archive import (
    BuiltPackage,
    FileEntry,
    Limits,
    build_package,
    inspect_package,
    select_files,
)
from extensions.errors import ArchiveTooLargeError, ExtensionError, UnsafeArchiveError


def toml(name: str = "demo", version: str = "1.0.0", *, build: str = "", readme: str | None = None) -> str:
    readme_line = f'readme = "{readme}"\n' if readme else ""
    return (
        "[extension]\n"
        f'name = "{name}"\n'
        f'version = "{version}"\n'
        'description = "An extension for the archive builder tests"\n'
        'type = "taskserv"\n'
        'license = "MIT"\n'
        f"{readme_line}"
        "\n[provides]\n"
        f'taskservs = ["{name}"]\n'
        f"{build}"
    )


FILES: dict[str, str] = {
    "README.md": "# demo\n\nAn extension for the archive builder tests.\n",
    "kcl/demo.k": 'schema Demo:\n    name: str = "demo"\n',
    "kcl/lib/util.k": "double = lambda x: int -> int { x * 2 }\n",
    "nulib/demo.nu": "export def main [] { print 'demo' }\n",
    "templates/demo.conf.j2": "name = {{ name }}\n",
    "docs/guide.md": "# Guide\n",
}


def write_tree(root: Path, files: dict[str, str | bytes], order: Iterable[str] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel in order if order is not None else files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = files[rel]
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return root


def make_source(root: Path, *, build: str = "", extra: dict[str, str | bytes] | None = None) -> Path:
    files: dict[str, str | bytes] = {"extension.toml": toml(build=build), **FILES, **(extra or {})}
    return write_tree(root, files)


def members(path: Path) -> list[tarfile.TarInfo]:
    with tarfile.open(path, "r:gz") as tar:
        return tar.getmembers()


def names(path: Path) -> list[str]:
    return [m.name for m in members(path)]


def packaged(path: Path) -> list[str]:
    """Regular files, relative to the top directory."""
    return [m.name.split("/", 1)[1] for m in members(path) if m.isfile()]


# --------------------------------------------------------------------------------------------------
# Reproducibility


def test_it_builds_byte_identical_packages_whatever_the_mtimes_umask_and_creation_order(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {"extension.toml": toml(), **FILES, "bin/run.sh": "#!/bin/sh\necho hi\n"}
    order = list(files)
    old = os.umask(0o022)
    try:
        first = write_tree(tmp_path / "a" / "demo", files, order)
        os.chmod(first / "bin/run.sh", 0o755)  # noqa: S103
        os.umask(0o077)
        second = write_tree(tmp_path / "b" / "demo", files, reversed(order))
        os.chmod(second / "bin/run.sh", 0o700)
    finally:
        os.umask(old)
    for i, path in enumerate(sorted(second.rglob("*"))):
        os.utime(path, (1_000_000 + i * 977, 1_500_000_000 + i * 3_601))
    one = build_package(first, tmp_path / "out1")
    two = build_package(second, tmp_path / "out2")
    assert one.path.read_bytes() == two.path.read_bytes()
    assert one.sha256 == two.sha256 == hashlib.sha256(one.path.read_bytes()).hexdigest()
    again = build_package(first, tmp_path / "out3")
    assert again.path.read_bytes() == one.path.read_bytes()


def test_it_uses_source_date_epoch_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = make_source(tmp_path / "src")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    built = build_package(source, tmp_path / "out")
    assert {m.mtime for m in members(built.path)} == {1_700_000_000}
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    zero = build_package(source, tmp_path / "zero")
    assert {m.mtime for m in members(zero.path)} == {0}
    assert zero.sha256 != built.sha256


def test_the_source_date_epoch_argument_wins_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = make_source(tmp_path / "src")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    built = build_package(source, tmp_path / "out", source_date_epoch=86_400)
    assert {m.mtime for m in members(built.path)} == {86_400}


@pytest.mark.parametrize("value", ["yesterday", "-5", "1.5"])
def test_it_refuses_a_malformed_source_date_epoch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    source = make_source(tmp_path / "src")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", value)
    with pytest.raises(ExtensionError) as info:
        build_package(source, tmp_path / "out")
    assert info.value.path == "SOURCE_DATE_EPOCH"
    assert "non-negative integer" in str(info.value)
    assert not (tmp_path / "out" / "demo-1.0.0.tar.gz").exists()


def test_the_gzip_header_has_mtime_zero_no_file_name_and_level_6(tmp_path: Path) -> None:
    built = build_package(make_source(tmp_path / "src"), tmp_path / "out", source_date_epoch=1_700_000_000)
    data = built.path.read_bytes()
    assert data[:3] == b"\x1f\x8b\x08"
    assert data[3] == 0  # FLG: no FNAME, no FEXTRA, no FCOMMENT
    assert data[4:8] == b"\x00\x00\x00\x00"  # MTIME
    assert b"demo-1.0.0.tar" not in data[:64]
    with gzip.open(built.path) as f:
        raw = f.read()
    rebuilt = gzip.compress(raw, compresslevel=6, mtime=0)
    assert rebuilt[10:] == data[10:]  # same deflate stream at level 6 (header OS/XFL bytes aside)


def test_members_are_sorted_normalised_and_under_the_top_directory(tmp_path: Path) -> None:
    built = build_package(make_source(tmp_path / "src"), tmp_path / "out", source_date_epoch=0)
    infos = members(built.path)
    listed = [m.name for m in infos]
    assert listed == sorted(listed, key=lambda n: n.encode())
    assert listed[0] == "demo-1.0.0"
    assert all(n == "demo-1.0.0" or n.startswith("demo-1.0.0/") for n in listed)
    assert listed == [
        "demo-1.0.0",
        "demo-1.0.0/MANIFEST.json",
        "demo-1.0.0/README.md",
        "demo-1.0.0/docs",
        "demo-1.0.0/docs/guide.md",
        "demo-1.0.0/extension.toml",
        "demo-1.0.0/kcl",
        "demo-1.0.0/kcl/demo.k",
        "demo-1.0.0/kcl/lib",
        "demo-1.0.0/kcl/lib/util.k",
        "demo-1.0.0/nulib",
        "demo-1.0.0/nulib/demo.nu",
        "demo-1.0.0/templates",
        "demo-1.0.0/templates/demo.conf.j2",
    ]
    for m in infos:
        assert (m.uid, m.gid, m.uname, m.gname, m.mtime) == (0, 0, "", "", 0)
        assert m.type in (tarfile.DIRTYPE, tarfile.REGTYPE)
        assert m.mode == (0o755 if m.isdir() else 0o644)


def test_it_marks_files_with_any_execute_bit_0755(tmp_path: Path) -> None:
    source = make_source(tmp_path / "src", extra={"bin/a.sh": "#!/bin/sh\n", "bin/b.sh": "#!/bin/sh\n"})
    os.chmod(source / "bin/a.sh", 0o744)
    os.chmod(source / "bin/b.sh", 0o601)  # only "other" may execute: still executable
    os.chmod(source / "README.md", 0o600)
    built = build_package(source, tmp_path / "out")
    modes = {m.name: m.mode for m in members(built.path)}
    assert modes["demo-1.0.0/bin/a.sh"] == 0o755
    assert modes["demo-1.0.0/bin/b.sh"] == 0o755
    assert modes["demo-1.0.0/README.md"] == 0o644


def test_long_and_non_ascii_paths_use_pax_headers_never_gnu_longnames(tmp_path: Path) -> None:
    long_rel = "docs/" + "very-long-directory-name/" * 5 + "file.md"
    source = make_source(tmp_path / "src", extra={long_rel: "long\n", "docs/café.md": "café\n"})
    built = build_package(source, tmp_path / "out")
    with gzip.open(built.path) as f:
        raw = f.read()
    assert b"././@LongLink" not in raw
    assert b"././@PaxHeader" in raw
    assert f"demo-1.0.0/{long_rel}" in names(built.path)
    assert "demo-1.0.0/docs/café.md" in names(built.path)
    for m in members(built.path):
        needs_pax = len(m.name.encode()) > 100 or not m.name.isascii()
        spelled = m.name + "/" if m.isdir() else m.name
        assert m.pax_headers == ({"path": spelled} if needs_pax else {})


# --------------------------------------------------------------------------------------------------
# MANIFEST.json and the result


def test_manifest_json_lists_every_other_file_with_size_and_sha256(tmp_path: Path) -> None:
    source = make_source(tmp_path / "src")
    built = build_package(source, tmp_path / "out")
    with tarfile.open(built.path) as tar:
        f = tar.extractfile("demo-1.0.0/MANIFEST.json")
        assert f is not None
        text = f.read()
    rels = sorted(["extension.toml", *FILES], key=lambda p: p.encode())
    expected_files = [
        {
            "path": rel,
            "size": (source / rel).stat().st_size,
            "sha256": hashlib.sha256((source / rel).read_bytes()).hexdigest(),
        }
        for rel in rels
    ]
    expected = {"format": 1, "name": "demo", "version": "1.0.0", "files": expected_files}
    assert json.loads(text) == expected
    assert text == (json.dumps(expected, sort_keys=True, indent=2) + "\n").encode()
    assert built.files == tuple(FileEntry(e["path"], e["size"], e["sha256"]) for e in expected_files)  # type: ignore[arg-type]


def test_it_returns_the_package_path_sha256_size_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    built = build_package(make_source(tmp_path / "src"), tmp_path / "out")
    data = (tmp_path / "out" / "demo-1.0.0.tar.gz").read_bytes()
    assert isinstance(built, BuiltPackage)
    assert built.path == tmp_path / "out" / "demo-1.0.0.tar.gz"
    assert (built.name, built.version) == ("demo", "1.0.0")
    assert built.sha256 == hashlib.sha256(data).hexdigest()
    assert built.size == len(data)
    assert os.listdir(tmp_path / "out") == ["demo-1.0.0.tar.gz"]
    assert (built.path.stat().st_mode & 0o777) == 0o644


def test_a_build_inside_the_source_does_not_package_its_own_output(tmp_path: Path) -> None:
    source = make_source(tmp_path / "src")
    first = build_package(source, source / "dist")
    second = build_package(source, source / "dist")
    inside = build_package(source, source / "out")
    inside_again = build_package(source, source / "out")
    other = make_source(tmp_path / "other")
    in_place = build_package(other, other)
    in_place_again = build_package(other, other)
    assert len({first.sha256, second.sha256, inside.sha256, inside_again.sha256}) == 1
    assert in_place.sha256 == in_place_again.sha256 == first.sha256
    assert not any(p.startswith(("dist/", "out/")) or p.endswith(".tar.gz") for p in packaged(inside.path))


# --------------------------------------------------------------------------------------------------
# Selection


def test_without_include_everything_but_the_always_excluded_files_is_packaged(tmp_path: Path) -> None:
    junk: dict[str, str | bytes] = {
        ".git/config": "[core]\n",
        ".git/objects/ab/cdef": "blob",
        "dist/demo-0.9.0.tar.gz": "old",
        "kcl/__pycache__/x.cpython-311.pyc": "bytecode",
        "helpers/tool.pyc": "bytecode",
        ".DS_Store": "finder",
        "docs/.DS_Store": "finder",
        "MANIFEST.json": '{"stale": true}',
        "docs/MANIFEST.json": "{}",  # only the top-level one is the builder's
        "templates/dist/page.html": "<p>kept: only the top-level dist/ is output</p>",
        ".gitignore": "*.tmp\n",
    }
    source = make_source(tmp_path / "src", extra=junk)
    built = build_package(source, tmp_path / "out")
    expected = sorted(
        ["extension.toml", *FILES, "docs/MANIFEST.json", "templates/dist/page.html", ".gitignore"],
        key=lambda p: p.encode(),
    )
    assert [f.path for f in built.files] == expected
    assert packaged(built.path) == sorted([*expected, "MANIFEST.json"], key=lambda p: p.encode())
    with tarfile.open(built.path) as tar:
        top_manifest = tar.extractfile("demo-1.0.0/MANIFEST.json")
        assert top_manifest is not None
        assert json.loads(top_manifest.read())["format"] == 1  # the builder's, not the stale one


def test_include_and_exclude_are_gitignore_patterns(tmp_path: Path) -> None:
    build = (
        "\n[build]\n"
        'include = ["kcl/**", "nulib/**", "docs/**", "*.tmp", "LICENSE"]\n'
        'exclude = ["tests/**", "*.tmp", "!keep.tmp", "docs/**/draft-*.md", "/kcl/generated"]\n'
    )
    extra: dict[str, str | bytes] = {
        "LICENSE": "MIT\n",
        "tests/test_demo.nu": "assert true\n",
        "kcl/tests/inner.k": "x = 1\n",  # `tests/**` is anchored to the top: this one stays
        "scratch.tmp": "tmp\n",
        "kcl/notes.tmp": "tmp\n",
        "keep.tmp": "kept by the negation\n",
        "docs/keep.tmp": "kept by the negation, at any depth\n",
        "docs/a/b/draft-plan.md": "draft\n",
        "docs/a/final.md": "final\n",
        "kcl/generated/out.k": "generated\n",
        "kcl/sub/generated/out.k": "kept: /kcl/generated is anchored\n",
        "templates/demo.conf.j2": "not included by any pattern\n",
        "README.md": "forced in: the manifest's readme\n",
    }
    source = make_source(tmp_path / "src", build=build, extra=extra)
    assert select_files(
        source,
        include=["kcl/**", "nulib/**", "docs/**", "*.tmp", "LICENSE"],
        exclude=["tests/**", "*.tmp", "!keep.tmp", "docs/**/draft-*.md", "/kcl/generated"],
        readme="README.md",
    ) == [
        "LICENSE",
        "README.md",
        "docs/a/final.md",
        "docs/guide.md",
        "docs/keep.tmp",
        "extension.toml",
        "kcl/demo.k",
        "kcl/lib/util.k",
        "kcl/sub/generated/out.k",
        "kcl/tests/inner.k",
        "keep.tmp",
        "nulib/demo.nu",
    ]
    built = build_package(source, tmp_path / "out")
    assert packaged(built.path) == sorted(
        [
            "LICENSE",
            "MANIFEST.json",
            "README.md",
            "docs/a/final.md",
            "docs/guide.md",
            "docs/keep.tmp",
            "extension.toml",
            "keep.tmp",
            "kcl/demo.k",
            "kcl/lib/util.k",
            "kcl/sub/generated/out.k",
            "kcl/tests/inner.k",
            "nulib/demo.nu",
        ],
        key=lambda p: p.encode(),
    )


def test_extension_toml_and_the_named_readme_are_always_included(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {
        "extension.toml": toml(readme="docs/INDEX.md", build='\n[build]\ninclude = ["kcl/**"]\n'),
        "docs/INDEX.md": "# Index\n",
        "README.md": "not the readme here\n",
        "kcl/demo.k": "x = 1\n",
    }
    source = write_tree(tmp_path / "src", files)
    built = build_package(source, tmp_path / "out")
    assert packaged(built.path) == ["MANIFEST.json", "docs/INDEX.md", "extension.toml", "kcl/demo.k"]
    assert select_files(source, include=["kcl/**"], exclude=["extension.toml"]) == ["extension.toml", "kcl/demo.k"]


def test_an_include_pattern_that_matches_no_file_is_a_warning_and_one_for_a_forced_file_is_not(
    tmp_path: Path,
) -> None:
    build = '\n[build]\ninclude = ["README.md", "extension.toml", "kcl/**", "LICENSE", "!kcl/x.k"]\n'
    source = write_tree(
        tmp_path / "src", {"extension.toml": toml(readme="README.md", build=build), **FILES, "kcl/x.k": "x = 1\n"}
    )
    built = build_package(source, tmp_path / "out")
    # README.md and extension.toml are packaged whatever include says, but the patterns naming
    # them do match a file; a negation is never reported.
    assert built.warnings == ("[build] include pattern 'LICENSE' matches no file",)
    assert packaged(built.path) == ["MANIFEST.json", "README.md", "extension.toml", "kcl/demo.k", "kcl/lib/util.k"]


def test_a_missing_readme_is_not_an_error(tmp_path: Path) -> None:
    source = write_tree(tmp_path / "src", {"extension.toml": toml(), "kcl/demo.k": "x = 1\n"})
    built = build_package(source, tmp_path / "out")
    assert packaged(built.path) == ["MANIFEST.json", "extension.toml", "kcl/demo.k"]
    assert inspect_package(built.path).readme_text is None


# --------------------------------------------------------------------------------------------------
# Refusals


def test_it_refuses_a_symlink_in_the_source(tmp_path: Path) -> None:
    source = make_source(tmp_path / "src")
    os.symlink("/etc/passwd", source / "kcl" / "passwd.k")
    with pytest.raises(UnsafeArchiveError) as info:
        build_package(source, tmp_path / "out")
    assert info.value.path == "kcl/passwd.k"
    assert info.value.code == "unsafe_archive"
    assert "symbolic link" in str(info.value)
    assert "regular files" in str(info.value)
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []


def test_it_refuses_a_symlinked_directory_without_following_it(tmp_path: Path) -> None:
    outside = write_tree(tmp_path / "outside", {"secret.txt": "secret\n"})
    source = make_source(tmp_path / "src")
    os.symlink(outside, source / "linked")
    with pytest.raises(UnsafeArchiveError) as info:
        build_package(source, tmp_path / "out")
    assert info.value.path == "linked"


def test_it_refuses_a_symlinked_extension_toml_before_reading_it(tmp_path: Path) -> None:
    real = write_tree(tmp_path / "real", {"extension.toml": toml()})
    source = write_tree(tmp_path / "src", {"README.md": "# x\n"})
    os.symlink(real / "extension.toml", source / "extension.toml")
    with pytest.raises(UnsafeArchiveError) as info:
        build_package(source, tmp_path / "out")
    assert info.value.path == "extension.toml"


def test_it_refuses_a_fifo_in_the_source(tmp_path: Path) -> None:
    source = make_source(tmp_path / "src")
    os.mkfifo(source / "nulib" / "pipe")
    with pytest.raises(UnsafeArchiveError) as info:
        build_package(source, tmp_path / "out")
    assert info.value.path == "nulib/pipe"
    assert "a FIFO" in str(info.value)


def test_an_excluded_symlink_is_ignored(tmp_path: Path) -> None:
    source = make_source(tmp_path / "src", build='\n[build]\nexclude = [".venv/"]\n')
    (source / ".venv" / "bin").mkdir(parents=True)
    os.symlink("/usr/bin/python3", source / ".venv" / "bin" / "python")
    built = build_package(source, tmp_path / "out")
    assert not any(p.startswith(".venv") for p in packaged(built.path))


def test_it_refuses_names_that_collide_after_case_folding(tmp_path: Path) -> None:
    source = make_source(tmp_path / "src", extra={"docs/Guide.md": "# Other guide\n"})
    with pytest.raises(UnsafeArchiveError) as info:
        build_package(source, tmp_path / "out")
    assert "collides" in str(info.value)
    assert info.value.path in ("demo-1.0.0/docs/Guide.md", "demo-1.0.0/docs/guide.md")


def test_it_refuses_a_backslash_in_a_file_name(tmp_path: Path) -> None:
    source = make_source(tmp_path / "src", extra={"kcl/a\\b.k": "x = 1\n"})
    with pytest.raises(UnsafeArchiveError) as info:
        build_package(source, tmp_path / "out")
    assert info.value.path == "kcl/a\\b.k"


# --------------------------------------------------------------------------------------------------
# Limits while building


@pytest.mark.parametrize(
    ("limits", "limit"),
    [
        (Limits(max_members=5), "max_members"),
        (Limits(max_unpacked_bytes=1000), "max_unpacked_bytes"),
        (Limits(max_path_bytes=30), "max_path_bytes"),
        (Limits(max_depth=3), "max_depth"),
        (Limits(max_manifest_bytes=100), "max_manifest_bytes"),
        (Limits(max_package_bytes=500), "max_package_bytes"),
    ],
)
def test_it_enforces_the_limits_while_building(tmp_path: Path, limits: Limits, limit: str) -> None:
    source = make_source(tmp_path / "src", extra={"docs/big.md": "lorem ipsum " * 100})
    with pytest.raises(ArchiveTooLargeError) as info:
        build_package(source, tmp_path / "out", limits=limits)
    assert info.value.limit == limit
    assert info.value.code == "archive_too_large"
    assert "allowed: at most" in str(info.value)
    out = tmp_path / "out"
    assert not out.exists() or os.listdir(out) == []  # not even a temporary file


def test_it_streams_file_contents_with_bounded_memory(tmp_path: Path) -> None:
    source = make_source(tmp_path / "src")
    with open(source / "docs" / "big.bin", "wb") as f:
        for i in range(32):
            f.write(hashlib.sha256(str(i).encode()).digest() * 32768)  # 32 MiB, 1 MiB at a time
    tracemalloc.start()
    try:
        built = build_package(source, tmp_path / "out")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024
    assert next(f for f in built.files if f.path == "docs/big.bin").size == 32 * 1024 * 1024


def test_a_built_package_passes_inspection(tmp_path: Path) -> None:
    source = make_source(tmp_path / "src")
    built = build_package(source, tmp_path / "out")
    info = inspect_package(io.BytesIO(built.path.read_bytes()))
    assert (info.name, info.version, info.sha256, info.size) == ("demo", "1.0.0", built.sha256, built.size)
    assert info.files == built.files
