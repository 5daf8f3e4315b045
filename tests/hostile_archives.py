"""Hand-made hostile packages, one function per way a package must be refused (SPEC 2.4).

Each function returns a `Hostile`: the case's name, the package bytes, the class name and code of the
error that must be raised, and text the error message must contain (the member it names; None when
the problem is the archive as a whole). Every case is refused under the default `Limits`, so the
registry's HTTP tests can upload them unchanged. `ALL_HOSTILE` lists the functions (call one to get
its case; results are cached per process, the big ones are built lazily in well under a second).
`SOURCE_HOSTILE` lists those `extract_source_archive` must refuse the same way (the MANIFEST.json and
top-directory rules are the package's own: `PACKAGE_ONLY`).

Everything is built in memory with `tarfile` and hand-set `TarInfo`, or as raw header bytes where
`tarfile` cannot write the case (a NUL hidden in a name, a non-UTF-8 name). The gzip bombs are built
from one deflate block repeated after full flushes, so a 1 GiB stream costs ~1 MB and ~0.2 s.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import json
import struct
import tarfile
import zlib
from collections.abc import Callable, Sequence
from typing import NamedTuple

TOP = "demo-1.0.0"
GiB = 1 << 30
MiB = 1 << 20

EXTENSION_TOML = b"""\
[extension]
name = "demo"
version = "1.0.0"
description = "A small extension used to test package inspection"
type = "taskserv"
license = "MIT"

[provides]
taskservs = ["demo"]
"""

README = b"# demo\n\nA small extension used to test package inspection.\n"
KCL = b'schema Demo:\n    name: str = "demo"\n'
BASE_FILES: dict[str, bytes] = {"README.md": README, "extension.toml": EXTENSION_TOML, "kcl/demo.k": KCL}

UNSAFE = ("UnsafeArchiveError", "unsafe_archive")
INVALID = ("ArchiveError", "invalid_archive")
TOO_LARGE = ("ArchiveTooLargeError", "archive_too_large")

#: Absolute paths a broken extractor would write to; the tests check they never appear.
ABSOLUTE_TARGETS = ("/tmp/provisioning-hostile-absolute.txt",)


class Hostile(NamedTuple):
    name: str
    data: bytes
    error: str  # the exception class name
    code: str  # its SPEC error code
    member: str | None  # text the error message must contain (the member it names)
    applies_to_source: bool = True


Entry = tuple[tarfile.TarInfo, bytes | None]


# --------------------------------------------------------------------------------------------------
# Building blocks


def file_entry(name: str, data: bytes = b"", *, mode: int = 0o644) -> Entry:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    return info, data


def dir_entry(name: str) -> Entry:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    return info, None


def special_entry(name: str, type_: bytes, *, linkname: str = "") -> Entry:
    info = tarfile.TarInfo(name)
    info.type = type_
    info.linkname = linkname
    info.mode = 0o644
    if type_ in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        info.devmajor, info.devminor = 1, 3
    return info, None


def tar_bytes(entries: Sequence[Entry], *, end: bool = True, fmt: int = tarfile.PAX_FORMAT) -> bytes:
    """A tar stream of ``entries`` (with the end-of-archive blocks and record padding when ``end``)."""
    buf = io.BytesIO()
    tar = tarfile.TarFile(fileobj=buf, mode="w", format=fmt, encoding="utf-8", errors="surrogateescape")
    for info, data in entries:
        tar.addfile(info, io.BytesIO(data) if data is not None else None)
    if end:
        tar.close()
        return buf.getvalue()
    return buf.getvalue()  # no end-of-archive blocks: the caller appends more


def gz(raw: bytes, *, level: int = 6) -> bytes:
    return _gzip_header() + _deflate(raw, level) + struct.pack("<II", zlib.crc32(raw), len(raw) & 0xFFFFFFFF)


def _gzip_header() -> bytes:
    return b"\x1f\x8b\x08\x00" + b"\x00\x00\x00\x00" + b"\x00\xff"


def _deflate(raw: bytes, level: int) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(raw) + c.flush()


def manifest_json(files: dict[str, bytes], *, name: str = "demo", version: str = "1.0.0") -> bytes:
    entries = [
        {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for path, data in sorted(files.items(), key=lambda kv: kv[0].encode())
    ]
    doc = {"format": 1, "name": name, "version": version, "files": entries}
    return (json.dumps(doc, sort_keys=True, indent=2) + "\n").encode()


def package_entries(
    files: dict[str, bytes] | None = None,
    *,
    top: str = TOP,
    manifest: bytes | bool | None = True,
) -> list[Entry]:
    """The members of a valid package (sorted, with directories), MANIFEST.json computed unless
    ``manifest`` is given as bytes (used as is) or False/None (left out)."""
    files = dict(BASE_FILES if files is None else files)
    all_files = dict(files)
    if manifest is True:
        all_files["MANIFEST.json"] = manifest_json(files)
    elif isinstance(manifest, bytes):
        all_files["MANIFEST.json"] = manifest
    dirs = {top}
    for path in all_files:
        parts = path.split("/")
        for i in range(1, len(parts)):
            dirs.add(f"{top}/{'/'.join(parts[:i])}")
    members: list[tuple[bytes, Entry]] = [(d.encode(), dir_entry(d)) for d in dirs]
    members += [(f"{top}/{p}".encode(), file_entry(f"{top}/{p}", data)) for p, data in all_files.items()]
    return [entry for _, entry in sorted(members, key=lambda m: m[0])]


def package_bytes(
    files: dict[str, bytes] | None = None,
    *,
    top: str = TOP,
    manifest: bytes | bool | None = True,
    extra: Sequence[Entry] = (),
) -> bytes:
    """A package: the valid members, then ``extra`` (hostile) members, then the end of the archive."""
    return gz(tar_bytes([*package_entries(files, top=top, manifest=manifest), *extra]))


def raw_header(name: bytes, *, size: int = 0, type_: bytes = tarfile.REGTYPE) -> bytes:
    """A ustar header block whose name field holds exactly ``name`` (up to 100 bytes, any bytes)."""
    info = tarfile.TarInfo("x" * len(name))
    info.size = size
    info.type = type_
    block = bytearray(info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "strict"))
    block[0:100] = name.ljust(100, b"\x00")
    block[148:156] = b" " * 8
    checksum = sum(block)
    block[148:156] = b"%06o\x00 " % checksum
    return bytes(block)


def _pad(data: bytes) -> bytes:
    return data + b"\x00" * (-len(data) % tarfile.BLOCKSIZE)


def gzip_repeated(prefix: bytes, chunk: bytes, count: int, suffix: bytes = b"", *, level: int = 9) -> bytes:
    """A gzip stream of ``prefix + chunk * count + suffix``, built by compressing ``chunk`` once: after
    a full flush the compressor starts afresh, so its output block can be repeated as is."""
    c = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    out = [_gzip_header(), c.compress(prefix), c.flush(zlib.Z_FULL_FLUSH)]
    block = c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH) == block  # the trick holds for this zlib
    out += [block] * count
    out.append(c.compress(suffix) + c.flush())
    crc = zlib.crc32(prefix)
    for _ in range(count):
        crc = zlib.crc32(chunk, crc)
    crc = zlib.crc32(suffix, crc)
    total = len(prefix) + len(chunk) * count + len(suffix)
    out.append(struct.pack("<II", crc, total & 0xFFFFFFFF))
    return b"".join(out)


#: The cases whose rule belongs to packages only (MANIFEST.json, the NAME-VERSION top directory):
#: `extract_source_archive` accepts their bytes, or refuses them for another reason.
PACKAGE_ONLY = frozenset(
    {
        "outside_top_directory",
        "top_directory_mismatch",
        "missing_manifest_json",
        "manifest_wrong_sha256",
        "manifest_wrong_size",
        "manifest_extra_file",
        "manifest_missing_file",
        "manifest_bad_json",
        "manifest_nested_too_deeply",
        "manifest_huge_number",
        "manifest_wrong_version",
        "missing_extension_toml",
    }
)


def _case(name: str, data: bytes, kind: tuple[str, str], member: str | None) -> Hostile:
    return Hostile(name, data, kind[0], kind[1], member, name not in PACKAGE_ONLY)


# --------------------------------------------------------------------------------------------------
# Unsafe names


@functools.cache
def absolute_path() -> Hostile:
    target = ABSOLUTE_TARGETS[0]
    return _case("absolute_path", package_bytes(extra=[file_entry(target, b"pwned\n")]), UNSAFE, target)


@functools.cache
def dotdot_component() -> Hostile:
    name = f"{TOP}/../../../x-dotdot"
    return _case("dotdot_component", package_bytes(extra=[file_entry(name, b"pwned\n")]), UNSAFE, name)


@functools.cache
def backslash_in_name() -> Hostile:
    name = f"{TOP}/..\\..\\x-backslash"
    return _case("backslash_in_name", package_bytes(extra=[file_entry(name, b"pwned\n")]), UNSAFE, f"{TOP}/..")


@functools.cache
def nul_in_name() -> Hostile:
    """A raw ustar header whose name field is ``demo-1.0.0/ok.txt\\0../../x-nul``."""
    name = f"{TOP}/ok.txt".encode() + b"\x00../../x-nul"
    raw = tar_bytes(package_entries(), end=False) + raw_header(name, size=6) + _pad(b"pwned\n")
    return _case("nul_in_name", gz(raw + b"\x00" * 10240), UNSAFE, f"{TOP}/ok.txt")


@functools.cache
def non_utf8_name() -> Hostile:
    """A raw ustar header named ``demo-1.0.0/caf\\xe9.txt`` (Latin-1, not UTF-8)."""
    name = f"{TOP}/caf".encode() + b"\xe9.txt"
    raw = tar_bytes(package_entries(), end=False) + raw_header(name, size=6) + _pad(b"hello\n")
    return _case("non_utf8_name", gz(raw + b"\x00" * 10240), UNSAFE, f"{TOP}/caf\\xe9.txt")


@functools.cache
def pax_path_override() -> Hostile:
    """The ustar name is harmless; the PAX ``path`` record that overrides it is ``../x-pax``."""
    info, data = file_entry(f"{TOP}/ok.txt", b"pwned\n")
    info.pax_headers = {"path": "../x-pax"}
    return _case("pax_path_override", package_bytes(extra=[(info, data)]), UNSAFE, "../x-pax")


@functools.cache
def outside_top_directory() -> Hostile:
    name = "other-1.0.0/x.txt"
    data = package_bytes(extra=[file_entry(name, b"elsewhere\n")])
    return _case("outside_top_directory", data, UNSAFE, name)


@functools.cache
def top_directory_mismatch() -> Hostile:
    """Everything under ``wrong-2.0.0/`` while extension.toml says demo 1.0.0."""
    data = package_bytes(top="wrong-2.0.0")
    return _case("top_directory_mismatch", data, UNSAFE, "wrong-2.0.0/")


# --------------------------------------------------------------------------------------------------
# Member types


@functools.cache
def symlink_member() -> Hostile:
    name = f"{TOP}/link"
    data = package_bytes(extra=[special_entry(name, tarfile.SYMTYPE, linkname="/etc/passwd")])
    return _case("symlink_member", data, UNSAFE, name)


@functools.cache
def hardlink_member() -> Hostile:
    name = f"{TOP}/hard"
    data = package_bytes(extra=[special_entry(name, tarfile.LNKTYPE, linkname="/etc/passwd")])
    return _case("hardlink_member", data, UNSAFE, name)


@functools.cache
def char_device_member() -> Hostile:
    name = f"{TOP}/null"
    return _case("char_device_member", package_bytes(extra=[special_entry(name, tarfile.CHRTYPE)]), UNSAFE, name)


@functools.cache
def block_device_member() -> Hostile:
    name = f"{TOP}/sda"
    return _case("block_device_member", package_bytes(extra=[special_entry(name, tarfile.BLKTYPE)]), UNSAFE, name)


@functools.cache
def fifo_member() -> Hostile:
    name = f"{TOP}/pipe"
    return _case("fifo_member", package_bytes(extra=[special_entry(name, tarfile.FIFOTYPE)]), UNSAFE, name)


@functools.cache
def sparse_member() -> Hostile:
    """An old-GNU sparse file (type ``S``)."""
    name = f"{TOP}/sparse.bin"
    info = tarfile.TarInfo(name)
    info.type = tarfile.GNUTYPE_SPARSE
    raw = tar_bytes(package_entries(), end=False) + info.tobuf(tarfile.GNU_FORMAT, "utf-8", "strict")
    return _case("sparse_member", gz(raw + b"\x00" * 10240), UNSAFE, name)


# --------------------------------------------------------------------------------------------------
# Duplicates and collisions


@functools.cache
def duplicate_path() -> Hostile:
    name = f"{TOP}/README.md"
    return _case("duplicate_path", package_bytes(extra=[file_entry(name, b"# again\n")]), UNSAFE, name)


@functools.cache
def case_collision() -> Hostile:
    name = f"{TOP}/readme.md"
    return _case("case_collision", package_bytes(extra=[file_entry(name, b"# lower\n")]), UNSAFE, name)


@functools.cache
def nfc_collision() -> Hostile:
    """``café.txt`` composed (U+00E9) and decomposed (e + U+0301)."""
    composed, decomposed = f"{TOP}/caf\u00e9.txt", f"{TOP}/cafe\u0301.txt"
    extra = [file_entry(composed, b"one\n"), file_entry(decomposed, b"two\n")]
    return _case("nfc_collision", package_bytes(extra=extra), UNSAFE, decomposed)


# --------------------------------------------------------------------------------------------------
# MANIFEST.json and extension.toml


def _tampered(doc_change: Callable[[dict[str, object]], None]) -> bytes:
    doc = json.loads(manifest_json(BASE_FILES))
    doc_change(doc)
    return (json.dumps(doc, sort_keys=True, indent=2) + "\n").encode()


@functools.cache
def missing_manifest_json() -> Hostile:
    data = package_bytes(manifest=False)
    return _case("missing_manifest_json", data, INVALID, f"{TOP}/MANIFEST.json")


@functools.cache
def manifest_wrong_sha256() -> Hostile:
    def change(doc: dict[str, object]) -> None:
        for entry in doc["files"]:  # type: ignore[attr-defined]
            if entry["path"] == "README.md":
                entry["sha256"] = "0" * 64

    data = package_bytes(manifest=_tampered(change))
    return _case("manifest_wrong_sha256", data, INVALID, f"{TOP}/README.md")


@functools.cache
def manifest_wrong_size() -> Hostile:
    files = dict(BASE_FILES, **{"kcl/demo.k": KCL + b"# grew\n"})
    data = package_bytes(files, manifest=manifest_json(BASE_FILES))
    return _case("manifest_wrong_size", data, INVALID, f"{TOP}/kcl/demo.k")


@functools.cache
def manifest_extra_file() -> Hostile:
    """A file in the package that MANIFEST.json does not list."""
    files = dict(BASE_FILES, **{"nulib/smuggled.nu": b"def main [] { }\n"})
    data = package_bytes(files, manifest=manifest_json(BASE_FILES))
    return _case("manifest_extra_file", data, INVALID, f"{TOP}/nulib/smuggled.nu")


@functools.cache
def manifest_missing_file() -> Hostile:
    """MANIFEST.json lists a file the package does not have."""
    files = dict(BASE_FILES, **{"kcl/gone.k": b"x = 1\n"})
    data = package_bytes(BASE_FILES, manifest=manifest_json(files))
    return _case("manifest_missing_file", data, INVALID, f"{TOP}/kcl/gone.k")


@functools.cache
def manifest_bad_json() -> Hostile:
    data = package_bytes(manifest=b'{"format": 1, "name": "demo",\n')
    return _case("manifest_bad_json", data, INVALID, f"{TOP}/MANIFEST.json")


@functools.cache
def manifest_nested_too_deeply() -> Hostile:
    """MANIFEST.json nested deeper than the JSON decoder recurses."""
    data = package_bytes(manifest=b'{"format": 1, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    return _case("manifest_nested_too_deeply", data, INVALID, f"{TOP}/MANIFEST.json")


@functools.cache
def manifest_huge_number() -> Hostile:
    """MANIFEST.json with an integer literal longer than Python converts."""
    data = package_bytes(manifest=b'{"format": ' + b"9" * 5000 + b"}")
    return _case("manifest_huge_number", data, INVALID, f"{TOP}/MANIFEST.json")


@functools.cache
def manifest_wrong_version() -> Hostile:
    data = package_bytes(manifest=_tampered(lambda doc: doc.update(version="2.0.0")))
    return _case("manifest_wrong_version", data, INVALID, f"{TOP}/MANIFEST.json")


@functools.cache
def missing_extension_toml() -> Hostile:
    files = {k: v for k, v in BASE_FILES.items() if k != "extension.toml"}
    data = package_bytes(files)
    return _case("missing_extension_toml", data, INVALID, f"{TOP}/extension.toml")


@functools.cache
def oversize_extension_toml() -> Hostile:
    """A valid extension.toml padded with a comment to 64 KiB + 1 byte."""
    padding = b"# " + b"x" * (64 * 1024 - len(EXTENSION_TOML) - 2) + b"\n"
    toml = EXTENSION_TOML + padding
    assert len(toml) == 64 * 1024 + 1
    data = package_bytes(dict(BASE_FILES, **{"extension.toml": toml}))
    return _case("oversize_extension_toml", data, TOO_LARGE, f"{TOP}/extension.toml")


# --------------------------------------------------------------------------------------------------
# Limits


@functools.cache
def too_many_members() -> Hostile:
    """10,001 members: the valid ones, then ``./`` entries (each one a member, but nothing to write, so
    extraction tests stay fast on slow disks), then a file: the 10,001st member, which is named."""
    base = package_entries()
    filler = [dir_entry("./") for _ in range(10_000 - len(base))]
    last = f"{TOP}/one-too-many.txt"
    data = gz(tar_bytes([*base, *filler, file_entry(last, b"x\n")]))
    return _case("too_many_members", data, TOO_LARGE, last)


@functools.cache
def too_many_distinct_members() -> Hostile:
    """10,001 distinct members (empty directories); the 10,001st is named. Extracting it creates 10,000
    directories before the limit is hit, which takes seconds on a busy disk: not in ALL_HOSTILE."""
    base = package_entries()
    names = [f"{TOP}/many/{i:05d}" for i in range(10_001 - len(base))]
    data = gz(tar_bytes([*base, *(dir_entry(n) for n in names)]))
    return _case("too_many_distinct_members", data, TOO_LARGE, names[-1])


@functools.cache
def path_too_long() -> Hostile:
    name = f"{TOP}/" + "a" * (256 - len(TOP) - 1)
    assert len(name.encode()) == 256
    return _case("path_too_long", package_bytes(extra=[file_entry(name, b"long\n")]), TOO_LARGE, name)


@functools.cache
def too_deep() -> Hostile:
    name = f"{TOP}/" + "d/" * 32 + "x"  # 34 components
    return _case("too_deep", package_bytes(extra=[file_entry(name, b"deep\n")]), TOO_LARGE, name)


@functools.cache
def gzip_bomb_declared() -> Hostile:
    """A member whose header honestly says 1 GiB of zeros (about 1 MB compressed)."""
    name = f"{TOP}/zeros.bin"
    info = tarfile.TarInfo(name)
    info.size = GiB
    prefix = tar_bytes(package_entries(), end=False) + info.tobuf(tarfile.PAX_FORMAT, "utf-8", "strict")
    data = gzip_repeated(prefix, bytes(MiB), 1024, b"\x00" * 10240)
    return _case("gzip_bomb_declared", data, TOO_LARGE, name)


@functools.cache
def gzip_bomb_hidden() -> Hostile:
    """An empty member, then 1 GiB of zeros no header accounts for: only counting every decompressed
    byte stops it."""
    prefix = tar_bytes([*package_entries(), file_entry(f"{TOP}/empty.bin")], end=False)
    data = gzip_repeated(prefix, bytes(MiB), 1024)
    return _case("gzip_bomb_hidden", data, TOO_LARGE, None)


@functools.cache
def huge_pax_header() -> Hostile:
    """A PAX extended header claiming 1 GiB (of zeros): tarfile reads such a header whole, so it must
    be refused from its size before tarfile reads it."""
    header = raw_header(b"././@PaxHeader", size=GiB, type_=tarfile.XHDTYPE)
    prefix = tar_bytes(package_entries(), end=False) + header
    data = gzip_repeated(prefix, bytes(MiB), 1024, b"\x00" * 10240)
    return _case("huge_pax_header", data, TOO_LARGE, "././@PaxHeader")


@functools.cache
def oversize_compressed() -> Hostile:
    """52 MiB of stored (incompressible-looking) gzip blocks: over the 50 MiB compressed limit."""
    name = f"{TOP}/big.bin"
    info = tarfile.TarInfo(name)
    info.size = 52 * MiB
    prefix = tar_bytes(package_entries(), end=False) + info.tobuf(tarfile.PAX_FORMAT, "utf-8", "strict")
    data = gzip_repeated(prefix, bytes(MiB), 52, b"\x00" * 10240, level=0)
    assert len(data) > 52 * MiB
    return _case("oversize_compressed", data, TOO_LARGE, None)


# --------------------------------------------------------------------------------------------------
# Not a package at all


@functools.cache
def not_gzip() -> Hostile:
    return _case("not_gzip", b"PK\x03\x04" + b"\x00" * 100, INVALID, None)


@functools.cache
def empty_file() -> Hostile:
    return _case("empty_file", b"", INVALID, None)


@functools.cache
def truncated_gzip() -> Hostile:
    whole = package_bytes()
    return _case("truncated_gzip", whole[: len(whole) // 2], INVALID, None)


@functools.cache
def empty_tar() -> Hostile:
    return _case("empty_tar", gz(b"\x00" * 10240), INVALID, None)


@functools.cache
def not_tar() -> Hostile:
    return _case("not_tar", gz(b"just some text, not a tar archive\n" * 40), INVALID, None)


@functools.cache
def corrupt_header() -> Hostile:
    """The third header's checksum is wrong: the archive is not silently cut short there."""
    raw = bytearray(tar_bytes(package_entries()))
    with tarfile.open(fileobj=io.BytesIO(bytes(raw))) as tar:
        offset = tar.getmembers()[2].offset
    raw[offset + 148 : offset + 156] = b"0000000\x00"
    return _case("corrupt_header", gz(bytes(raw)), INVALID, None)


@functools.cache
def data_after_end() -> Hostile:
    raw = tar_bytes(package_entries()) + _pad(b"hidden second archive\n")
    return _case("data_after_end", gz(raw), INVALID, None)


@functools.cache
def bad_gzip_crc() -> Hostile:
    whole = bytearray(package_bytes())
    whole[-8] ^= 0xFF  # the CRC32 of the trailer
    return _case("bad_gzip_crc", bytes(whole), INVALID, None)


@functools.cache
def data_after_gzip() -> Hostile:
    """A second gzip member after the package: nothing may hide behind the stream."""
    return _case("data_after_gzip", package_bytes() + gz(b"hidden"), INVALID, None)


ALL_HOSTILE: list[Callable[[], Hostile]] = [
    absolute_path,
    dotdot_component,
    backslash_in_name,
    nul_in_name,
    non_utf8_name,
    pax_path_override,
    outside_top_directory,
    top_directory_mismatch,
    symlink_member,
    hardlink_member,
    char_device_member,
    block_device_member,
    fifo_member,
    sparse_member,
    duplicate_path,
    case_collision,
    nfc_collision,
    missing_manifest_json,
    manifest_wrong_sha256,
    manifest_wrong_size,
    manifest_extra_file,
    manifest_missing_file,
    manifest_bad_json,
    manifest_nested_too_deeply,
    manifest_huge_number,
    manifest_wrong_version,
    missing_extension_toml,
    oversize_extension_toml,
    too_many_members,
    path_too_long,
    too_deep,
    gzip_bomb_declared,
    gzip_bomb_hidden,
    huge_pax_header,
    oversize_compressed,
    not_gzip,
    empty_file,
    truncated_gzip,
    empty_tar,
    not_tar,
    corrupt_header,
    data_after_end,
    bad_gzip_crc,
    data_after_gzip,
]

#: The cases `extract_source_archive` must refuse the same way.
SOURCE_HOSTILE: list[Callable[[], Hostile]] = [make for make in ALL_HOSTILE if make.__name__ not in PACKAGE_ONLY]


def tar_gz(files: dict[str, bytes], *, top: str = "", pax: dict[str, dict[str, str]] | None = None) -> bytes:
    """A gzip-compressed PAX tar of ``files`` (path -> bytes, under ``top/`` when given), each member
    with the PAX records ``pax`` names for its path: for attacks that need a hand-made header."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(f"{top}/{path}" if top else path)
            info.size = len(data)
            info.pax_headers = (pax or {}).get(path, {})
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)
