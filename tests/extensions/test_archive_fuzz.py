"""Whatever a tar or gzip stream holds, inspecting or extracting it raises one of the library's own
errors (invalid_archive, unsafe_archive, archive_too_large, invalid_manifest), never another
exception: PAX header dictionaries of any shape (GNU sparse records, number fields that are not
numbers, binary charsets), and packages cut off at any byte."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extensions.archive import build_package, inspect_package, safe_extract
from extensions.errors import ExtensionError

REPO = Path(__file__).resolve().parents[2]
_KEYS = [
    "GNU.sparse.major",
    "GNU.sparse.minor",
    "GNU.sparse.map",
    "GNU.sparse.size",
    "GNU.sparse.realsize",
    "GNU.sparse.name",
    "GNU.sparse.numblocks",
    "GNU.sparse.offset",
    "GNU.sparse.numbytes",
    "size",
    "mtime",
    "atime",
    "uid",
    "gid",
    "uname",
    "path",
    "linkpath",
    "hdrcharset",
    "SCHILY.xattr.user.x",
    "LIBARCHIVE.creationtime",
    "comment",
]
_values = st.one_of(
    st.sampled_from(["", "0", "1", "-1", "zz", "a,b", "1,2,3", "1e999", "NaN", "BINARY", "99999999999999999999999"]),
    st.text(max_size=40),
)
_pax = st.dictionaries(st.one_of(st.sampled_from(_KEYS), st.text(min_size=1, max_size=20)), _values, max_size=6)


def _package(pax: dict[str, str], *, global_pax: dict[str, str] | None = None) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT, pax_headers=global_pax or {}) as tar:
        info = tarfile.TarInfo("demo-1.0.0/extension.toml")
        data = b'[extension]\nname = "demo"\nversion = "1.0.0"\ndescription = "d"\ntype = "taskserv"\n'
        info.size = len(data)
        info.pax_headers = pax
        tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def _only_our_errors(data: bytes, tmp_path: Path) -> ExtensionError | None:
    try:
        inspect_package(io.BytesIO(data))
    except ExtensionError as exc:
        return exc
    dest = tmp_path / "out"
    try:
        safe_extract(io.BytesIO(data), dest)
    except ExtensionError as exc:
        return exc
    return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pax=_pax, global_pax=st.one_of(st.none(), _pax))
def test_any_pax_header_dictionary_gives_one_of_our_errors(
    tmp_path_factory: pytest.TempPathFactory, pax: dict[str, str], global_pax: dict[str, str] | None
) -> None:
    try:
        data = _package(pax, global_pax=global_pax)
    except (ValueError, UnicodeError, OverflowError, tarfile.TarError):
        return  # tarfile will not even write it
    error = _only_our_errors(data, tmp_path_factory.mktemp("pax"))
    keys = {**(global_pax or {}), **pax}
    # (a key holding "=" cannot be parsed back, and hides the records after it)
    if any(key.startswith("GNU.sparse.") for key in keys) and not any("=" in key for key in keys):
        assert error is not None and error.code == "unsafe_archive", error
        assert "sparse" in error.message


@pytest.mark.parametrize(
    "pax",
    [
        {"GNU.sparse.major": "1", "GNU.sparse.minor": "0"},
        {"GNU.sparse.map": "a,b"},
        {"GNU.sparse.size": "zz"},
        {"GNU.sparse.realsize": "zz"},
        {"GNU.sparse.name": "demo-1.0.0/x"},
    ],
)
def test_every_spelling_of_a_sparse_member_is_unsafe(tmp_path: Path, pax: dict[str, str]) -> None:
    error = _only_our_errors(_package(pax), tmp_path)
    assert error is not None and error.code == "unsafe_archive" and "is a sparse file" in error.message


@pytest.fixture(scope="module")
def real_package(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    source = next(p for p in sorted(REPO.glob("extensions/taskservs/*/*/")) if (p / "extension.toml").exists())
    return build_package(source, tmp_path_factory.mktemp("dist")).path.read_bytes()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=10**9), flip=st.integers(min_value=0, max_value=10**9))
def test_a_truncated_or_damaged_package_gives_one_of_our_errors(
    tmp_path_factory: pytest.TempPathFactory, real_package: bytes, cut: int, flip: int
) -> None:
    data = real_package[: cut % len(real_package)]
    error = _only_our_errors(data, tmp_path_factory.mktemp("cut"))
    assert error is not None  # every strict prefix is refused
    damaged = bytearray(real_package)
    damaged[flip % len(damaged)] ^= 0x5A
    _only_our_errors(bytes(damaged), tmp_path_factory.mktemp("flip"))  # an error of ours or a pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header=st.binary(min_size=512, max_size=512), tail=st.binary(max_size=2048))
def test_a_raw_header_block_of_any_bytes_gives_one_of_our_errors(
    tmp_path_factory: pytest.TempPathFactory, header: bytes, tail: bytes
) -> None:
    data = gzip.compress(header + tail + b"\0" * 1024, mtime=0)
    assert _only_our_errors(data, tmp_path_factory.mktemp("raw")) is not None
