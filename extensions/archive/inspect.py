"""Inspecting and extracting packages and source archives: one streaming pass, every member checked
before anything touches disk."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import stat
import tarfile
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO

from extensions.archive._common import (
    _ALLOWED_NAMES,
    _ALLOWED_TYPES,
    _SHA256_RE,
    CHUNK,
    DEFAULT_LIMITS,
    EXTENSION_TOML,
    MANIFEST_FORMAT,
    MANIFEST_JSON,
    README_MAX_BYTES,
    REBUILD_HINT,
    FileEntry,
    KiB,
    Limits,
    MiB,
    PackageInfo,
    _decode_readme,
    _display,
    _PathRegistry,
    _readme_parts,
    _split_name,
    _too_large,
    _top_for,
)
from extensions.errors import ArchiveError, ArchiveTooLargeError, ExtensionError, Problem, UnsafeArchiveError
from extensions.manifest import Manifest, parse_manifest

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------
# Streaming reads


class _CompressedReader:
    """The package's bytes in chunks, hashed and counted against ``max_package_bytes``."""

    def __init__(self, raw: IO[bytes], limits: Limits) -> None:
        self._raw = raw
        self._limit = limits.max_package_bytes
        self.sha = hashlib.sha256()
        self.size = 0

    def read_chunk(self) -> bytes:
        data = self._raw.read(CHUNK)
        if not data:
            return b""
        self.size += len(data)
        if self.size > self._limit:
            raise _too_large(
                f"the package is larger than {self._limit} bytes; allowed: at most {self._limit} bytes compressed",
                path="",
                limit="max_package_bytes",
                value=self.size,
            )
        self.sha.update(data)
        return data


def _tar_overhead(limits: Limits) -> int:
    """Room for tar headers and padding on top of ``max_unpacked_bytes`` at the gzip layer: per member a
    header block, its padding, and a PAX header (a header block plus records up to a few blocks);
    the end-of-archive blocks padded to a 10 KiB record."""
    per_member = 512 + 511 + 512 + 4 * 512
    return limits.max_members * per_member + 20 * 512 + 2 * tarfile.RECORDSIZE


class _GunzipReader:
    """Decompresses one gzip stream with bounded output per call, counting every byte produced.

    Refuses input that is not gzip, corrupt or truncated gzip data, a CRC or length mismatch (zlib
    checks the trailer), and anything after the end of the gzip stream.
    """

    def __init__(self, compressed: _CompressedReader, limits: Limits) -> None:
        self._in = compressed
        self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._limit = limits.max_unpacked_bytes + _tar_overhead(limits)
        self._limits = limits
        self._pending = b""
        self._maybe_more_output = False
        self._started = False
        self._done = False
        self.size = 0
        self.sha = hashlib.sha256()  # of the uncompressed tar: the OCI layer's DiffID

    def read(self, size: int = -1) -> bytes:
        if size is None or size <= 0:
            size = CHUNK
        while not self._done:
            if self._d.eof:
                self._finish()
                break
            if self._pending:
                data = self._pending
            elif self._maybe_more_output:
                data = b""
            else:
                data = self._in.read_chunk()
                if not self._started:
                    self._started = True
                    if not data:
                        raise ArchiveError(
                            "the package is empty (0 bytes); allowed: a gzip-compressed tar (.tar.gz)",
                            path="",
                        )
                    if not data.startswith(b"\x1f\x8b"):
                        raise ArchiveError(
                            "the package is not gzip-compressed; allowed: a gzip-compressed tar (.tar.gz)",
                            path="",
                        )
                if not data:
                    raise ArchiveError(
                        "the gzip stream is truncated (the package ends early); allowed: a complete .tar.gz "
                        f"({REBUILD_HINT})",
                        path="",
                    )
            try:
                out = self._d.decompress(data, size)
            except zlib.error as exc:
                raise ArchiveError(
                    f"the gzip data is corrupt ({exc}); allowed: a valid gzip-compressed tar ({REBUILD_HINT})",
                    path="",
                ) from None
            self._pending = self._d.unconsumed_tail
            self._maybe_more_output = len(out) == size
            if out:
                self.size += len(out)
                self.sha.update(out)
                if self.size > self._limit:
                    raise _too_large(
                        f"the package decompresses to more than {self._limit} bytes; allowed: at most "
                        f"{self._limits.max_unpacked_bytes} bytes of files (max_unpacked_bytes) plus tar "
                        "headers",
                        path="",
                        limit="max_unpacked_bytes",
                        value=self.size,
                    )
                return out
        return b""

    def _finish(self) -> None:
        self._done = True
        if self._d.unused_data or self._in.read_chunk():
            raise ArchiveError("there is data after the end of the gzip stream; allowed: a single gzip stream", path="")


_EXTENDED_TYPES = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)


def _extended_header_cap(limits: Limits) -> int:
    """The most bytes a PAX or GNU extended header may hold (all global PAX headers together too)."""
    return max(64 * KiB, 4 * limits.max_path_bytes)


def _raw_header_nul(buf: bytes) -> str | None:
    """The name of a ustar header whose name, prefix or link name field hides bytes after a NUL."""
    fields = [(0, 100), (157, 257)]
    ustar = buf[257:263] == b"ustar\x00"
    if ustar:
        fields.append((345, 500))
    for start, end in fields:
        value = buf[start:end]
        nul = value.find(0)
        if nul != -1 and value[nul:].strip(b"\x00"):
            name = value.rstrip(b"\x00").decode("utf-8", "surrogateescape")
            if ustar and start == 0 and buf[345:500].strip(b"\x00"):
                prefix = buf[345:500].rstrip(b"\x00").decode("utf-8", "surrogateescape")
                name = f"{prefix}/{name}"
            return _display(name)
    return None


@dataclass
class _File:
    size: int
    sha256: str


@dataclass
class _Scan:
    """What one pass over an archive found."""

    files: dict[tuple[str, ...], _File] = field(default_factory=dict)
    dirs: set[tuple[str, ...]] = field(default_factory=set)
    captured: dict[tuple[str, ...], bytes] = field(default_factory=dict)
    top: str | None = None
    manifest: Manifest | None = None
    manifest_data: bytes = b""
    readme: tuple[str, ...] | None = None
    members: int = 0
    unpacked: int = 0
    sha256: str = ""
    size: int = 0
    tar_sha256: str = ""


class _Extractor:
    """Writes members below a private directory it created; never follows a link, never overwrites."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._made: set[tuple[str, ...]] = set()

    def mkdir(self, parts: Sequence[str], shown: str) -> Path:
        path = self.root
        for i, part in enumerate(parts):
            path = path / part
            if tuple(parts[: i + 1]) in self._made:
                continue
            self._made.add(tuple(parts[: i + 1]))
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                if not stat.S_ISDIR(os.lstat(path).st_mode):
                    raise UnsafeArchiveError(
                        f"`{part}` is already a file; allowed: each path once", path=shown
                    ) from None
            else:
                os.chmod(path, 0o755)  # noqa: S103 - a package's directories are 0755 whatever the umask
        return path

    def open_file(self, member: tarfile.TarInfo, parts: Sequence[str], shown: str) -> IO[bytes]:
        # The last line of defence (STYLE 13): the stdlib's data filter must agree with our checks.
        try:
            tarfile.data_filter(member, os.fspath(self.root))
        except tarfile.FilterError as exc:
            raise UnsafeArchiveError(f"refused by the tar data filter ({exc}); {_ALLOWED_NAMES}", path=shown) from None
        parent = self.mkdir(parts[:-1], shown)
        target = parent / parts[-1]
        if not target.resolve().is_relative_to(self.root):
            raise UnsafeArchiveError(f"would be written outside the destination; {_ALLOWED_NAMES}", path=shown)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(target, flags, 0o600)
        except FileExistsError:
            raise UnsafeArchiveError(
                "duplicate path: the file appears twice; allowed: each path once", path=shown
            ) from None
        os.fchmod(fd, 0o755 if member.mode & 0o111 else 0o644)
        return os.fdopen(fd, "wb")


def _check_type(member: tarfile.TarInfo, shown: str) -> None:
    if member.type in (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE):
        if member.sparse is not None or any(k.startswith("GNU.sparse") for k in member.pax_headers):
            raise UnsafeArchiveError(f"is a sparse file; {_ALLOWED_TYPES}", path=shown)
        return
    kinds = {
        tarfile.SYMTYPE: f"a symbolic link (to `{_display(member.linkname)}`)",
        tarfile.LNKTYPE: f"a hard link (to `{_display(member.linkname)}`)",
        tarfile.CHRTYPE: "a character device",
        tarfile.BLKTYPE: "a block device",
        tarfile.FIFOTYPE: "a FIFO",
        tarfile.CONTTYPE: "a contiguous file",
        tarfile.GNUTYPE_SPARSE: "a sparse file",
    }
    kind = kinds.get(member.type, f"of tar type {member.type!r}")
    raise UnsafeArchiveError(f"is {kind}; {_ALLOWED_TYPES}", path=shown)


def _sparse(name: str) -> UnsafeArchiveError:
    return UnsafeArchiveError(f"is a sparse file; {_ALLOWED_TYPES}", path=_display(name))


def _next_member(tar: tarfile.TarFile) -> tarfile.TarInfo | None:
    """``tar.next()``, with every way tarfile can fail on a malformed header (it raises ValueError,
    OverflowError, UnicodeError, EOFError and others besides TarError) turned into `ArchiveError`.
    Our own checks (`ExtensionError`) and the platform's (memory, I/O) pass through."""
    try:
        return tar.next()
    except (ExtensionError, tarfile.TarError, MemoryError, OSError):
        raise
    except Exception as exc:  # noqa: BLE001 - tarfile's parsing errors have no common base
        raise ArchiveError(
            f"not a valid tar archive: a corrupt header ({type(exc).__name__}: {_display(str(exc))[:200]}); "
            f"allowed: a gzip-compressed POSIX tar ({REBUILD_HINT})",
            path="",
        ) from None


class _Scanner:
    """One streaming pass: checks every header before its data, counts, hashes, optionally writes."""

    def __init__(
        self,
        limits: Limits,
        *,
        package: bool,
        extractor: _Extractor | None = None,
        readme: tuple[str, ...] | None = None,
    ) -> None:
        self.limits = limits
        self.package = package
        self.extractor = extractor
        self.scan = _Scan(readme=readme)
        self._registry = _PathRegistry()
        self._last_block: bytes | None = None
        self._readme_preset = readme is not None
        self._headers = 0
        self._global_header_bytes = 0

    def run(self, raw: IO[bytes]) -> _Scan:
        compressed = _CompressedReader(raw, self.limits)
        gunzip = _GunzipReader(compressed, self.limits)
        scanner = self

        class CheckedTarInfo(tarfile.TarInfo):
            @classmethod
            def frombuf(cls, buf: bytes | bytearray, encoding: str, errors: str) -> CheckedTarInfo:
                scanner._last_block = bytes(buf)
                info = super().frombuf(buf, encoding, errors)
                hidden = _raw_header_nul(bytes(buf))
                if hidden is not None:
                    raise UnsafeArchiveError(f"the member name contains a NUL byte; {_ALLOWED_NAMES}", path=hidden)
                scanner._header(info)
                return info

            # GNU sparse files, in every spelling (old GNU headers, PAX 0.0, 0.1 and 1.0, and the
            # GNU.sparse.* records on their own), are refused before tarfile parses their maps: a
            # malformed map would otherwise raise ValueError deep inside tarfile.
            def _proc_sparse(self, tarfile: tarfile.TarFile) -> tarfile.TarInfo:
                raise _sparse(self.name)

            def _proc_gnusparse_00(self, next: tarfile.TarInfo, *args: Any) -> None:
                raise _sparse(next.name)

            _proc_gnusparse_01 = _proc_gnusparse_10 = _proc_gnusparse_00

            def _apply_pax_info(self, pax_headers: dict[str, str], encoding: str, errors: str) -> None:
                if any(key.startswith("GNU.sparse.") for key in pax_headers):
                    raise _sparse(self.name)
                super()._apply_pax_info(pax_headers, encoding, errors)  # type: ignore[misc]

        try:
            with tarfile.open(  # type: ignore[call-overload]  # stream mode needs only read()
                fileobj=gunzip,
                mode="r|",
                bufsize=CHUNK,
                tarinfo=CheckedTarInfo,
                encoding="utf-8",
                errors="surrogateescape",
            ) as tar:
                while (member := _next_member(tar)) is not None:
                    tar.members.clear()  # tarfile keeps every TarInfo; we need only the current one
                    self._member(tar, member)
                self._end(tar)
        except tarfile.ReadError as exc:
            message = str(exc)
            if message == "empty file":
                raise ArchiveError(
                    "the package holds no tar members; allowed: a tar with NAME-VERSION/extension.toml "
                    f"({REBUILD_HINT})",
                    path="",
                ) from None
            raise ArchiveError(
                f"not a valid tar archive ({message}); allowed: a gzip-compressed POSIX tar ({REBUILD_HINT})",
                path="",
            ) from None
        except tarfile.TarError as exc:
            raise ArchiveError(
                f"not a valid tar archive ({exc}); allowed: a gzip-compressed POSIX tar", path=""
            ) from None
        self.scan.sha256 = compressed.sha.hexdigest()
        self.scan.size = compressed.size
        self.scan.tar_sha256 = gunzip.sha.hexdigest()
        if self.scan.members == 0:
            raise ArchiveError(
                f"the package holds no tar members; allowed: a tar with NAME-VERSION/extension.toml ({REBUILD_HINT})",
                path="",
            )
        return self.scan

    def _header(self, info: tarfile.TarInfo) -> None:
        """Bound what tarfile itself reads into memory: it reads a PAX or GNU extended header whole, and
        keeps global PAX records for the rest of the archive."""
        limits = self.limits
        self._headers += 1
        if self._headers > 3 * limits.max_members + 16:
            raise _too_large(
                f"the archive has more than {3 * limits.max_members + 16} tar headers; allowed: at most "
                f"{limits.max_members} members, each with at most two extended headers",
                path=_display(info.name),
                limit="max_members",
                value=self._headers,
            )
        if info.type not in _EXTENDED_TYPES:
            return
        cap = _extended_header_cap(limits)
        if info.type == tarfile.XGLTYPE:
            self._global_header_bytes += info.size
        if info.size > cap or self._global_header_bytes > cap:
            raise _too_large(
                f"a PAX or GNU extended header of {info.size} bytes; allowed: at most {cap} bytes (they only "
                "need to hold a path)",
                path=_display(info.name),
                limit="max_path_bytes",
                value=info.size,
            )

    def _end(self, tar: tarfile.TarFile) -> None:
        """After the last member: a proper end-of-archive block, only zeros after it, and the gzip end."""
        last = self._last_block
        if last is None or len(last) != tarfile.BLOCKSIZE or last.count(0) != tarfile.BLOCKSIZE:
            raise ArchiveError(
                f"the tar archive is truncated or has a corrupt header at byte {tar.offset}; allowed: a "
                f"complete tar ending with an end-of-archive block ({REBUILD_HINT})",
                path="",
            )
        stream = tar.fileobj
        assert stream is not None
        while chunk := stream.read(CHUNK):
            if chunk.count(0) != len(chunk):
                raise ArchiveError(
                    "there is data after the tar end-of-archive block; allowed: only zero padding", path=""
                )

    def _member(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        limits, scan = self.limits, self.scan
        shown = _display(member.name)
        scan.members += 1
        if scan.members > limits.max_members:
            raise _too_large(
                f"the archive has more than {limits.max_members} members; allowed: at most {limits.max_members}",
                path=shown,
                limit="max_members",
                value=scan.members,
            )
        parts = _split_name(member.name, limits)
        _check_type(member, shown)
        is_dir = member.isdir()
        if not parts:
            if is_dir:  # the archive's own root (`./`)
                return
            raise UnsafeArchiveError(f"the member has an empty name; {_ALLOWED_NAMES}", path=shown)
        if self.package:
            self._check_top(parts, is_dir, shown)
        self._registry.add(parts, is_dir=is_dir, shown=shown)
        if is_dir:
            scan.dirs.add(parts)
            if self.extractor is not None:
                self.extractor.mkdir(parts, shown)
            return
        self._file(tar, member, parts, shown)

    def _check_top(self, parts: tuple[str, ...], is_dir: bool, shown: str) -> None:
        scan = self.scan
        if scan.top is None and (len(parts) > 1 or is_dir):
            scan.top = parts[0]
        if scan.top is None or parts[0] != scan.top or (len(parts) == 1 and not is_dir):
            where = f"`{_display(scan.top)}/`" if scan.top else "NAME-VERSION/"
            raise UnsafeArchiveError(
                f"the member lies outside the top directory {where}; allowed: every member under the single "
                "top directory NAME-VERSION/",
                path=shown,
            )

    def _file(self, tar: tarfile.TarFile, member: tarfile.TarInfo, parts: tuple[str, ...], shown: str) -> None:
        limits, scan = self.limits, self.scan
        rel = parts[1:] if self.package else parts
        is_manifest = rel == (EXTENSION_TOML,) or (not self.package and parts[1:] == (EXTENSION_TOML,))
        if member.size > limits.max_unpacked_bytes - scan.unpacked:
            raise self._unpacked_error(shown, scan.unpacked + member.size)
        cap = 0
        if is_manifest:
            if member.size > limits.max_manifest_bytes:
                raise self._manifest_error(shown, member.size)
            cap = limits.max_manifest_bytes if self.package else 0
        elif self.package and rel == (MANIFEST_JSON,):
            cap = max(1 * MiB, limits.max_members * (limits.max_path_bytes + 256))
            if member.size > cap:
                raise _too_large(
                    f"MANIFEST.json is {member.size} bytes; allowed: at most {cap} bytes",
                    path=shown,
                    limit="max_members",
                    value=member.size,
                )
        elif self.package and self._wants_readme(rel):
            cap = README_MAX_BYTES + 4
        out = self.extractor.open_file(member, parts, shown) if self.extractor is not None else None
        sha = hashlib.sha256()
        size = 0
        kept = bytearray()
        try:
            data = tar.extractfile(member)
            assert data is not None
            while chunk := data.read(CHUNK):
                size += len(chunk)
                scan.unpacked += len(chunk)
                if scan.unpacked > limits.max_unpacked_bytes:
                    raise self._unpacked_error(shown, scan.unpacked)
                if is_manifest and size > limits.max_manifest_bytes:
                    raise self._manifest_error(shown, size)
                sha.update(chunk)
                if len(kept) < cap:
                    kept += chunk[: cap - len(kept)]
                if out is not None:
                    out.write(chunk)
        finally:
            if out is not None:
                out.close()
        scan.files[parts] = _File(size, sha.hexdigest())
        if cap:
            scan.captured[parts] = bytes(kept)
        if self.package and is_manifest:
            self._read_manifest(bytes(kept), shown)

    def _wants_readme(self, rel: tuple[str, ...]) -> bool:
        if self.scan.readme is not None:
            return rel == self.scan.readme
        return self.scan.manifest is None and rel == ("README.md",)  # the default, before extension.toml

    def _read_manifest(self, data: bytes, shown: str) -> None:
        scan = self.scan
        manifest = parse_manifest(data, max_bytes=self.limits.max_manifest_bytes, limits=self.limits.manifest)
        scan.manifest = manifest
        scan.manifest_data = data
        if not self._readme_preset:
            scan.readme = _readme_parts(manifest.readme)
        expected = _top_for(manifest)
        if scan.top != expected:
            raise UnsafeArchiveError(
                f"the top directory `{_display(scan.top or '')}/` does not match extension.toml "
                f"({manifest.name} {manifest.version}); allowed: `{expected}/` ({REBUILD_HINT})",
                path=f"{_display(scan.top or '')}/",
            )

    def _unpacked_error(self, shown: str, value: int) -> ArchiveTooLargeError:
        limit = self.limits.max_unpacked_bytes
        return _too_large(
            f"the files add up to more than {limit} bytes; allowed: at most {limit} bytes unpacked",
            path=shown,
            limit="max_unpacked_bytes",
            value=value,
        )

    def _manifest_error(self, shown: str, value: int) -> ArchiveTooLargeError:
        limit = self.limits.max_manifest_bytes
        return _too_large(
            f"extension.toml is {value} bytes; allowed: at most {limit} bytes",
            path=shown,
            limit="max_manifest_bytes",
            value=value,
        )


def _verify_manifest_json(scan: _Scan) -> tuple[FileEntry, ...]:
    """Check MANIFEST.json against the files that were read; return its entries."""
    top = scan.top or ""
    manifest = scan.manifest
    if manifest is None:
        raise ArchiveError(
            f"the package has no `{top}/extension.toml`; allowed: a package with NAME-VERSION/extension.toml "
            f"({REBUILD_HINT})",
            path=f"{top}/{EXTENSION_TOML}",
        )
    where = f"{top}/{MANIFEST_JSON}"
    data = scan.captured.get((top, MANIFEST_JSON))
    if data is None:
        raise ArchiveError(
            "the package has no MANIFEST.json; allowed: a package listing its files in "
            f"NAME-VERSION/MANIFEST.json ({REBUILD_HINT})",
            path=where,
        )

    def bad(message: str) -> ArchiveError:
        return ArchiveError(f"{message}; {REBUILD_HINT}", path=where)

    try:
        doc: Any = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad(f"MANIFEST.json is not valid JSON ({exc}); allowed: the JSON document the builder writes")
    except RecursionError:
        raise bad("MANIFEST.json is nested too deeply; allowed: the flat JSON document the builder writes") from None
    except ValueError:  # an integer literal longer than Python converts (4300 digits)
        raise bad(
            "MANIFEST.json holds a number thousands of digits long; allowed: the JSON document the builder writes"
        ) from None
    if not isinstance(doc, dict):
        raise bad('MANIFEST.json is not a JSON object; allowed: {"format": 1, "name", "version", "files"}')
    if doc.get("format") != MANIFEST_FORMAT or isinstance(doc.get("format"), bool):
        raise bad(f"MANIFEST.json has format {doc.get('format')!r}; allowed: {MANIFEST_FORMAT}")
    if doc.get("name") != str(manifest.name) or doc.get("version") != str(manifest.version):
        raise bad(
            f"MANIFEST.json names {doc.get('name')!r} {doc.get('version')!r} but extension.toml says "
            f"{str(manifest.name)!r} {str(manifest.version)!r}; allowed: the same name and version"
        )
    listed_raw = doc.get("files")
    if not isinstance(listed_raw, list):
        raise bad("MANIFEST.json has no `files` list; allowed: a list of {path, size, sha256}")
    listed: dict[str, tuple[int, str]] = {}
    for i, item in enumerate(listed_raw):
        ok = (
            isinstance(item, dict)
            and isinstance(item.get("path"), str)
            and isinstance(item.get("size"), int)
            and not isinstance(item.get("size"), bool)
            and item["size"] >= 0
            and isinstance(item.get("sha256"), str)
            and _SHA256_RE.match(item["sha256"]) is not None
        )
        if not ok:
            raise bad(
                f'MANIFEST.json files[{i}] is malformed; allowed: {{"path": str, "size": int >= 0, '
                '"sha256": 64 lower-case hex digits}'
            )
        if item["path"] in listed:
            raise bad(f"MANIFEST.json lists `{item['path']}` twice; allowed: each file once")
        listed[item["path"]] = (item["size"], item["sha256"])
    actual = {"/".join(parts[1:]): f for parts, f in scan.files.items() if parts[1:] != (MANIFEST_JSON,)}
    problems: list[Problem] = []
    for path in sorted(set(listed) - set(actual), key=lambda p: p.encode("utf-8", "surrogateescape")):
        problems.append(Problem(f"{top}/{path}", "is listed in MANIFEST.json but is not in the package"))
    for path in sorted(actual, key=lambda p: p.encode("utf-8", "surrogateescape")):
        f = actual[path]
        if path not in listed:
            problems.append(Problem(f"{top}/{_display(path)}", "is in the package but not listed in MANIFEST.json"))
            continue
        size, digest = listed[path]
        if size != f.size:
            problems.append(Problem(f"{top}/{path}", f"is {f.size} bytes but MANIFEST.json says {size}"))
        elif digest != f.sha256:
            problems.append(Problem(f"{top}/{path}", f"has sha256 {f.sha256} but MANIFEST.json says {digest}"))
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ArchiveError(
            f"{first.message}{more}; allowed: a MANIFEST.json that matches the content exactly; {REBUILD_HINT}",
            path=first.path,
            problems=problems,
        )
    return tuple(
        FileEntry(path, *listed[path]) for path in sorted(listed, key=lambda p: p.encode("utf-8", "surrogateescape"))
    )


# --------------------------------------------------------------------------------------------------
# Public readers


@contextlib.contextmanager
def _opened(source: Path | BinaryIO) -> Iterator[IO[bytes]]:
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            yield f
    else:
        yield source


def _package_info(scan: _Scan, files: tuple[FileEntry, ...], readme_text: str | None) -> PackageInfo:
    assert scan.manifest is not None
    return PackageInfo(
        name=str(scan.manifest.name),
        version=str(scan.manifest.version),
        sha256=scan.sha256,
        size=scan.size,
        unpacked_size=scan.unpacked,
        tar_sha256=scan.tar_sha256,
        files=files,
        manifest_text=scan.manifest_data.decode("utf-8"),
        readme_text=readme_text,
        manifest=scan.manifest,
    )


def uncompressed_sha256(source: Path | IO[bytes], *, limits: Limits = DEFAULT_LIMITS) -> str:
    """The sha256 of the tar inside a package (its OCI DiffID), decompressed in one bounded stream
    with the checks of the inspection's gzip layer (`inspect_package` reports the same value as
    ``PackageInfo.tar_sha256``); the tar itself is not parsed. A file object is read from its
    current position and not closed."""
    with contextlib.ExitStack() as stack:
        f = stack.enter_context(open(source, "rb")) if isinstance(source, os.PathLike) else source
        gunzip = _GunzipReader(_CompressedReader(f, limits), limits)
        while gunzip.read(CHUNK):
            pass
        return gunzip.sha.hexdigest()


def inspect_package(source: Path | BinaryIO, *, limits: Limits = DEFAULT_LIMITS) -> PackageInfo:
    """Read a whole package, checking everything `safe_extract` checks, without writing anything.

    ``source`` is a path or a binary file object (read from its current position; not closed). A
    non-seekable stream is copied to a temporary spool first (within ``max_package_bytes``), because a
    README that the manifest names and that comes before ``extension.toml`` needs a second pass.
    """
    with _opened(source) as f:
        if not _seekable(f):
            with tempfile.SpooledTemporaryFile(max_size=8 * MiB) as spool:
                _copy_limited(f, spool, limits)
                spool.seek(0)
                return _inspect(spool, limits)
        return _inspect(f, limits)


def _seekable(f: IO[bytes]) -> bool:
    try:
        return f.seekable()
    except (AttributeError, OSError, ValueError):
        return False


def _copy_limited(src: IO[bytes], dst: IO[bytes], limits: Limits) -> None:
    reader = _CompressedReader(src, limits)
    while chunk := reader.read_chunk():
        dst.write(chunk)


def _inspect(f: IO[bytes], limits: Limits) -> PackageInfo:
    start = f.tell()
    scan = _Scanner(limits, package=True).run(f)
    files = _verify_manifest_json(scan)
    readme_text: str | None = None
    if scan.readme is not None and scan.top is not None:
        key = (scan.top, *scan.readme)
        if key in scan.files:
            if key not in scan.captured:
                # The README came before extension.toml named it: read it in a second pass.
                f.seek(start)
                again = _Scanner(limits, package=True, readme=scan.readme).run(f)
                if again.sha256 != scan.sha256:
                    raise ArchiveError("the package changed while it was being read; allowed: a stable file", path="")
                scan.captured[key] = again.captured[key]
            readme_text = _decode_readme(scan.captured[key])
    return _package_info(scan, files, readme_text)


def _private_dir(dest: Path) -> tuple[Path, Path]:
    dest = Path(dest)
    if os.path.lexists(dest):
        raise FileExistsError(f"{dest}: the destination exists; allowed: a path that does not exist yet")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".extract-"))
    return dest, tmp


def _remove(tmp: Path) -> None:
    try:
        shutil.rmtree(tmp)
    except FileNotFoundError:
        pass
    except OSError:
        log.exception("could not remove the temporary directory %s", tmp)


def safe_extract(source: Path | BinaryIO, dest: Path, *, limits: Limits = DEFAULT_LIMITS) -> PackageInfo:
    """Check and extract a package so that ``dest`` holds the contents of ``NAME-VERSION/``.

    ``dest`` must not exist. Members are checked one by one as they stream in and written into a
    private temporary directory beside ``dest`` (``.extract-*``); when the whole package has been read
    and MANIFEST.json matches what was written, the top directory is renamed to ``dest``. On any error
    the temporary directory is removed and nothing is left behind.
    """
    dest, tmp = _private_dir(dest)
    try:
        root = tmp.resolve()
        scanner = _Scanner(limits, package=True, extractor=_Extractor(root))
        with _opened(source) as f:
            scan = scanner.run(f)
        files = _verify_manifest_json(scan)
        assert scan.top is not None
        readme_text: str | None = None
        if scan.readme is not None and (scan.top, *scan.readme) in scan.files:
            readme_text = _decode_readme(_read_head(root.joinpath(scan.top, *scan.readme), README_MAX_BYTES + 4))
        info = _package_info(scan, files, readme_text)
        if os.path.lexists(dest):
            raise FileExistsError(f"{dest}: the destination appeared during extraction; allowed: a new path")
        os.rename(root / scan.top, dest)
        return info
    finally:
        _remove(tmp)


def read_readme(root: Path, readme: str) -> str | None:
    """The README named ``readme`` (as in extension.toml) of an extracted package at ``root``, as
    `PackageInfo.readme_text` has it; None when there is none. Never follows a link."""
    parts = _readme_parts(readme)
    if parts is None:
        return None
    try:
        return _decode_readme(_read_head(Path(root).joinpath(*parts), README_MAX_BYTES + 4))
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def _read_head(path: Path, limit: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        return f.read(limit)


def extract_source_archive(source: Path | BinaryIO, dest: Path, *, limits: Limits = DEFAULT_LIMITS) -> Path:
    """Check and extract an author's source tarball (for server-side builds) into ``dest``.

    The same safety rules and limits as `safe_extract`, but MANIFEST.json is not needed and the top
    directory may be anything: when every member lies under one top directory holding
    ``extension.toml`` that directory is the extension, otherwise ``extension.toml`` must be at the
    root. Returns the directory holding ``extension.toml`` (``dest`` or ``dest/TOP``). ``dest`` must not
    exist; on any error nothing is left behind.
    """
    dest, tmp = _private_dir(dest)
    try:
        root = tmp.resolve()
        with _opened(source) as f:
            scan = _Scanner(limits, package=False, extractor=_Extractor(root)).run(f)
        tops = {parts[0] for parts in [*scan.files, *scan.dirs]}
        base: tuple[str, ...]
        if len(tops) == 1 and (next(iter(tops)),) not in scan.files and (*tops, EXTENSION_TOML) in scan.files:
            base = (next(iter(tops)),)
        elif (EXTENSION_TOML,) in scan.files:
            base = ()
        else:
            raise ArchiveError(
                "the source archive has no extension.toml; allowed: extension.toml at the root of the "
                "archive or in its single top directory",
                path=EXTENSION_TOML,
            )
        os.chmod(root, 0o755)  # noqa: S103 - mkdtemp made it 0700; it becomes dest
        if os.path.lexists(dest):
            raise FileExistsError(f"{dest}: the destination appeared during extraction; allowed: a new path")
        os.rename(root, dest)
        return dest.joinpath(*base)
    finally:
        _remove(tmp)
