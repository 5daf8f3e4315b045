"""Building packages (`select_files`, `build_package`): the same source always gives the same bytes."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import logging
import os
import stat
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pathspec

from extensions.archive._common import (
    CHUNK,
    COMPRESSLEVEL,
    DEFAULT_LIMITS,
    EXTENSION_TOML,
    MANIFEST_FORMAT,
    MANIFEST_JSON,
    REBUILD_HINT,
    BuiltPackage,
    FileEntry,
    Limits,
    _display,
    _PathRegistry,
    _readme_parts,
    _split_name,
    _too_large,
    _top_for,
)
from extensions.errors import ArchiveError, ExtensionError, UnsafeArchiveError
from extensions.manifest import load_manifest

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------
# Building


def _select(
    source: Path,
    *,
    include: Sequence[str],
    exclude: Sequence[str],
    readme: str | None,
    skip: frozenset[str] = frozenset(),
    candidates: list[str] | None = None,
) -> list[str]:
    forced = {EXTENSION_TOML}
    readme_parts = _readme_parts(readme) if readme else None
    if readme_parts:
        forced.add("/".join(readme_parts))
    include_spec = pathspec.GitIgnoreSpec.from_lines(include) if include else None
    exclude_spec = pathspec.GitIgnoreSpec.from_lines(exclude) if exclude else None
    selected: list[str] = []
    stack: list[tuple[str, str]] = [("", os.fspath(source))]
    while stack:
        rel_dir, abs_dir = stack.pop()
        try:
            listing = list(os.scandir(abs_dir))
        except OSError as exc:
            raise ArchiveError(
                f"cannot read the directory ({exc.strerror}); allowed: readable directories (or leave it "
                "out with [build] exclude)",
                path=_display(rel_dir or "."),
            ) from None
        for entry in listing:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                if entry.name in (".git", "__pycache__") or rel == "dist" or rel in skip:
                    continue
                stack.append((rel, entry.path))
                continue
            if rel not in forced and (_always_excluded(rel, entry.name) or rel in skip):
                continue
            if candidates is not None:  # what an include pattern may match: forced files too
                candidates.append(rel)
            if rel not in forced:
                if include_spec is not None and not include_spec.match_file(rel):
                    continue
                if exclude_spec is not None and exclude_spec.match_file(rel):
                    continue
            _check_source_entry(rel, st)
            selected.append(rel)
    return sorted(selected, key=lambda p: p.encode("utf-8"))


def _unmatched_includes(include: Sequence[str], candidates: Sequence[str]) -> list[str]:
    """The ``[build] include`` patterns (not negations) that match none of the candidate files."""
    unmatched = []
    for pattern in include:
        text = pattern.strip()
        if not text or text.startswith(("#", "!")):
            continue
        spec = pathspec.GitIgnoreSpec.from_lines([pattern])
        if not any(spec.match_file(rel) for rel in candidates):
            unmatched.append(pattern)
    return unmatched


def _always_excluded(rel: str, name: str) -> bool:
    return name in (".git", ".DS_Store") or name.endswith(".pyc") or rel == MANIFEST_JSON


def _check_source_entry(rel: str, st: os.stat_result) -> None:
    shown = _display(rel)
    mode = st.st_mode
    if not stat.S_ISREG(mode):
        kind = (
            "a symbolic link"
            if stat.S_ISLNK(mode)
            else "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "not a regular file"
        )
        raise UnsafeArchiveError(
            f"is {kind}; a package holds regular files and directories only: replace it with a regular "
            "file or leave it out with [build] exclude",
            path=shown,
        )
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsafeArchiveError(
            "the file name is not valid UTF-8; allowed: UTF-8 file names (rename it or exclude it)",
            path=shown,
        ) from None
    if "\\" in rel:
        raise UnsafeArchiveError(
            "the file name contains a backslash; allowed: names without `\\` (rename it or exclude it)",
            path=shown,
        )


def select_files(
    source: Path, *, include: Sequence[str], exclude: Sequence[str], readme: str | None = None
) -> list[str]:
    """The regular files of ``source`` that go into the package, as ``/``-separated paths relative to
    ``source``, sorted by their UTF-8 bytes.

    ``include`` and ``exclude`` are gitignore-style patterns (``[build]``): without ``include`` every
    file is included; ``exclude`` always applies. Never packaged: ``.git``, a top-level ``dist/``,
    ``__pycache__/``, ``*.pyc``, ``.DS_Store`` and a top-level ``MANIFEST.json`` (the builder writes its
    own). ``extension.toml`` and the ``readme`` file (when given and present) are always included.
    Symbolic links are never followed: a selected symlink, device, FIFO or socket is refused
    (`UnsafeArchiveError`), as are names that are not UTF-8 or hold a backslash.
    """
    return _select(Path(source), include=include, exclude=exclude, readme=readme)


def _source_date_epoch(value: int | None) -> int:
    if value is None:
        text = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
        if not text:
            return 0
        if not text.isdigit():
            raise ExtensionError(
                f"SOURCE_DATE_EPOCH={text!r} is not a number; allowed: a non-negative integer (seconds since "
                "1970-01-01 UTC), or unset for 0",
                path="SOURCE_DATE_EPOCH",
            )
        value = int(text)
    if value < 0:
        raise ExtensionError(
            f"source_date_epoch={value} is negative; allowed: a non-negative integer",
            path="SOURCE_DATE_EPOCH",
        )
    return value


class _HashingWriter:
    """A write-only file object that hashes and counts what goes through it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self._raw.write(data)

    def flush(self) -> None:
        self._raw.flush()


class _HashingReader:
    """A read-only file object that hashes what is read from it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self.sha = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self.sha.update(data)
        return data


def _open_source_file(path: Path, rel: str) -> IO[bytes]:
    """Open a source file without following a symlink, and check it is still a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise ArchiveError(
            f"cannot read the file ({exc.strerror}); allowed: readable regular files", path=_display(rel)
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeArchiveError("is no longer a regular file; allowed: regular files", path=_display(rel))
    return os.fdopen(fd, "rb")


def _hash_file(path: Path, rel: str) -> tuple[int, str]:
    sha = hashlib.sha256()
    size = 0
    with _open_source_file(path, rel) as f:
        while chunk := f.read(CHUNK):
            sha.update(chunk)
            size += len(chunk)
    return size, sha.hexdigest()


def _manifest_json(name: str, version: str, files: Sequence[FileEntry]) -> bytes:
    doc = {
        "format": MANIFEST_FORMAT,
        "name": name,
        "version": version,
        "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in files],
    }
    return (json.dumps(doc, sort_keys=True, indent=2) + "\n").encode("utf-8")


def _tarinfo(name: str, *, is_dir: bool, size: int, mode: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if is_dir else tarfile.REGTYPE
    info.size = size
    info.mode = mode
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def build_package(
    source: Path, out_dir: Path, *, source_date_epoch: int | None = None, limits: Limits = DEFAULT_LIMITS
) -> BuiltPackage:
    """Build the reproducible package of the extension in ``source`` as ``out_dir/NAME-VERSION.tar.gz``.

    Name, version, readme and ``[build]`` come from ``extension.toml`` (`load_manifest`). The mtime of
    every member is ``source_date_epoch``, else ``$SOURCE_DATE_EPOCH``, else 0. File contents are
    streamed (read twice: hashed for MANIFEST.json, then copied and hashed again to make sure they did
    not change). The limits apply to the package being built. The file is written to a temporary file
    in ``out_dir`` and renamed into place, so a failed build leaves nothing behind.
    """
    source = Path(source)
    out_dir = Path(out_dir)
    with contextlib.suppress(FileNotFoundError):  # a missing one is load_manifest's to report
        st = os.lstat(source / EXTENSION_TOML)
        _check_source_entry(EXTENSION_TOML, st)  # never read extension.toml through a symlink
        if st.st_size > limits.max_manifest_bytes:
            raise _too_large(
                f"extension.toml is {st.st_size} bytes; allowed: at most {limits.max_manifest_bytes} bytes",
                path=EXTENSION_TOML,
                limit="max_manifest_bytes",
                value=st.st_size,
            )
    manifest = load_manifest(source, max_bytes=limits.max_manifest_bytes, limits=limits.manifest)
    name, version = str(manifest.name), str(manifest.version)
    top = _top_for(manifest)
    mtime = _source_date_epoch(source_date_epoch)
    out_dir.mkdir(parents=True, exist_ok=True)
    # Never package our own output: the output directory when it is inside the source, or the
    # package (and its temporary files) when the output directory is the source itself.
    skip: set[str] = set()
    with contextlib.suppress(ValueError):
        out_rel = out_dir.resolve().relative_to(source.resolve()).as_posix()
        if out_rel == ".":
            skip.add(f"{top}.tar.gz")
        else:
            skip.add(out_rel)
    candidates: list[str] = []
    rels = _select(
        source,
        include=manifest.build_include,
        exclude=manifest.build_exclude,
        readme=manifest.readme,
        skip=frozenset(skip),
        candidates=candidates,
    )
    warnings = tuple(
        f"[build] include pattern {pattern!r} matches no file"
        for pattern in _unmatched_includes(manifest.build_include, candidates)
    )
    if MANIFEST_JSON in rels:  # forced in as the readme: still never a file of its own
        rels.remove(MANIFEST_JSON)

    # Names and limits, before any content is read.
    registry = _PathRegistry()
    dirs: set[str] = {top}
    for rel in [*rels, MANIFEST_JSON]:
        member = f"{top}/{rel}"
        parts = _split_name(member, limits)
        registry.add(parts, is_dir=False, shown=_display(member))
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]))
    count = len(dirs) + len(rels) + 1
    if count > limits.max_members:
        raise _too_large(
            f"the package would have {count} members; allowed: at most {limits.max_members} (leave files "
            "out with [build] exclude)",
            path=top,
            limit="max_members",
            value=count,
        )

    # Pass 1: hash every file for MANIFEST.json.
    entries: list[FileEntry] = []
    modes: dict[str, int] = {}
    total = 0
    for rel in rels:
        path = source / rel
        modes[rel] = 0o755 if os.lstat(path).st_mode & 0o111 else 0o644
        size, digest = _hash_file(path, rel)
        if rel == EXTENSION_TOML and size > limits.max_manifest_bytes:
            raise _too_large(
                f"extension.toml is {size} bytes; allowed: at most {limits.max_manifest_bytes} bytes",
                path=f"{top}/{rel}",
                limit="max_manifest_bytes",
                value=size,
            )
        total += size
        if total > limits.max_unpacked_bytes:
            raise _too_large(
                f"the files add up to more than {limits.max_unpacked_bytes} bytes; allowed: at most "
                f"{limits.max_unpacked_bytes} bytes unpacked (leave files out with [build] exclude)",
                path=f"{top}/{rel}",
                limit="max_unpacked_bytes",
                value=total,
            )
        entries.append(FileEntry(rel, size, digest))
    manifest_bytes = _manifest_json(name, version, entries)
    total += len(manifest_bytes)
    if total > limits.max_unpacked_bytes:
        raise _too_large(
            f"the files add up to {total} bytes; allowed: at most {limits.max_unpacked_bytes} bytes unpacked",
            path=f"{top}/{MANIFEST_JSON}",
            limit="max_unpacked_bytes",
            value=total,
        )

    # Pass 2: write the sorted members.
    by_rel = {e.path: e for e in entries}
    members: list[tuple[bytes, str, str | None]] = [(d.encode("utf-8"), d, None) for d in dirs]
    members += [(f"{top}/{rel}".encode(), f"{top}/{rel}", rel) for rel in [*rels, MANIFEST_JSON]]
    members.sort()
    final = out_dir / f"{top}.tar.gz"
    # The top directory can be 240 bytes long: a temporary name built on all of it would pass the
    # file system's 255-byte limit on a name (OSError) where the final NAME-VERSION.tar.gz does not.
    fd, tmp_name = tempfile.mkstemp(dir=out_dir, prefix=f".{top[:64]}.", suffix=".tar.gz.tmp")
    try:
        with os.fdopen(fd, "wb") as raw:
            writer = _HashingWriter(raw)
            with (
                gzip.GzipFile(filename="", mode="wb", compresslevel=COMPRESSLEVEL, fileobj=writer, mtime=0) as gz,
                tarfile.TarFile(
                    fileobj=gz, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8", errors="strict"
                ) as tar,
            ):
                tar.copybufsize = CHUNK  # type: ignore[attr-defined]  # missing from the stubs
                for _, member_name, member_rel in members:
                    if member_rel is None:
                        tar.addfile(_tarinfo(member_name, is_dir=True, size=0, mode=0o755, mtime=mtime))
                    elif member_rel == MANIFEST_JSON:
                        info = _tarinfo(member, is_dir=False, size=len(manifest_bytes), mode=0o644, mtime=mtime)
                        tar.addfile(info, io.BytesIO(manifest_bytes))
                    else:
                        _add_file(tar, source, by_rel[member_rel], member_name, modes[member_rel], mtime)
            raw.flush()
            os.fsync(raw.fileno())
        if writer.size > limits.max_package_bytes:
            raise _too_large(
                f"the package is {writer.size} bytes compressed; allowed: at most {limits.max_package_bytes} "
                "bytes (leave files out with [build] exclude)",
                path=final.name,
                limit="max_package_bytes",
                value=writer.size,
            )
        os.chmod(tmp_name, 0o644)
        os.replace(tmp_name, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    return BuiltPackage(
        path=final,
        name=name,
        version=version,
        sha256=writer.sha.hexdigest(),
        size=writer.size,
        files=tuple(entries),
        warnings=warnings,
    )


def _add_file(tar: tarfile.TarFile, source: Path, entry: FileEntry, member: str, mode: int, mtime: int) -> None:
    changed = f"changed while the package was being built; allowed: a source that stays still ({REBUILD_HINT})"
    with _open_source_file(source / entry.path, entry.path) as f:
        if os.fstat(f.fileno()).st_size != entry.size:
            raise ArchiveError(f"the file {changed}", path=_display(entry.path))
        reader = _HashingReader(f)
        info = _tarinfo(member, is_dir=False, size=entry.size, mode=mode, mtime=mtime)
        try:
            tar.addfile(info, reader)
        except OSError as exc:
            raise ArchiveError(f"the file {changed} ({exc})", path=_display(entry.path)) from None
    if reader.sha.hexdigest() != entry.sha256:
        raise ArchiveError(f"the file {changed}", path=_display(entry.path))


# --------------------------------------------------------------------------------------------------
# Reproducibility


@dataclass(frozen=True)
class Rebuilt:
    """Whether a package is what the builder makes of its own files (`rebuild_check`)."""

    reproducible: bool
    note: str  # why not, or how it was checked
    sha256: str  # of the rebuilt package


_HEADER_FIELDS = ("type", "mode", "uid", "gid", "uname", "gname", "mtime", "size")


def _members(package: Path) -> list[tuple[str, dict[str, object]]]:
    """The members of a package already inspected as safe: name and header fields, in order."""
    found = []
    with tarfile.open(package, mode="r:gz") as tar:
        for member in tar:
            found.append((member.name, {field: getattr(member, field) for field in _HEADER_FIELDS}))
    return found


def _difference(uploaded: list[tuple[str, dict[str, object]]], rebuilt: list[tuple[str, dict[str, object]]]) -> str:
    """The first way the uploaded package differs from the rebuilt one, in words."""
    names, again = [n for n, _ in uploaded], [n for n, _ in rebuilt]
    if set(names) != set(again):
        extra = sorted(set(names) - set(again))
        missing = sorted(set(again) - set(names))
        if extra:
            return f"it holds `{_display(extra[0])}`, which the builder leaves out" + (
                f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""
            )
        return f"it lacks `{_display(missing[0])}`, which the builder adds" + (
            f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        )
    if names != again:
        first = next(i for i, (a, b) in enumerate(zip(names, again, strict=True)) if a != b)
        return f"its members are not in the builder's order (sorted by path): `{_display(names[first])}` comes first"
    for (name, fields), (_, wanted) in zip(uploaded, rebuilt, strict=True):
        for field in _HEADER_FIELDS:
            if fields[field] != wanted[field]:
                return f"`{_display(name)}` has {field} {fields[field]!r} where the builder writes {wanted[field]!r}"
    return "its members are the builder's, but the tar or gzip encoding differs (a PAX header, the compression)"


def rebuild_check(package: Path, tree: Path, out_dir: Path, *, limits: Limits = DEFAULT_LIMITS) -> Rebuilt:
    """Rebuild ``package`` from ``tree`` (its own files, as `safe_extract` wrote them) with this
    builder, and say whether the bytes are identical. The member time of the package (all members
    share one in a reproducible build) is used as ``source_date_epoch``, so a package built with
    SOURCE_DATE_EPOCH is rebuilt with it too. ``package`` must have been inspected already."""
    uploaded = _members(package)
    times = {fields["mtime"] for _, fields in uploaded}
    only = times.pop() if len(times) == 1 else 0
    epoch = int(only) if isinstance(only, int | float) else 0
    built = build_package(tree, out_dir, source_date_epoch=max(0, epoch), limits=limits)
    digest = hashlib.sha256(Path(package).read_bytes()).hexdigest()
    if built.sha256 == digest:
        return Rebuilt(True, "rebuilt byte for byte from its own files by the registry's builder", built.sha256)
    return Rebuilt(False, _difference(uploaded, _members(built.path)), built.sha256)
