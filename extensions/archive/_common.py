"""What both sides of `extensions.archive` share: limits, the package's dataclasses, member names
and the checks on them."""

from __future__ import annotations

import codecs
import logging
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from extensions.errors import ArchiveTooLargeError, UnsafeArchiveError
from extensions.manifest import DEFAULT_MANIFEST_LIMITS, Manifest, ManifestLimits

log = logging.getLogger(__name__)

KiB = 1024
MiB = 1024 * KiB
CHUNK = 64 * KiB
COMPRESSLEVEL = 6
README_MAX_BYTES = 1 * MiB
MANIFEST_JSON = "MANIFEST.json"
EXTENSION_TOML = "extension.toml"
MANIFEST_FORMAT = 1
REBUILD_HINT = "rebuild the package with `provisioning extension build`"
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_ALLOWED_TYPES = "allowed: regular files and directories only"
_ALLOWED_NAMES = "allowed: relative UTF-8 paths with `/` separators under the top directory"


@dataclass(frozen=True)
class Limits:
    """Size limits (SPEC 2.4 defaults). The registry builds one from its settings."""

    max_package_bytes: int = 50 * MiB
    max_unpacked_bytes: int = 200 * MiB
    max_members: int = 10_000
    max_path_bytes: int = 255
    max_depth: int = 32
    max_manifest_bytes: int = 64 * KiB
    manifest: ManifestLimits = DEFAULT_MANIFEST_LIMITS  # the bounds on extension.toml's lists


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class FileEntry:
    """A regular file of a package; ``path`` is relative to ``NAME-VERSION/``."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class BuiltPackage:
    path: Path
    name: str
    version: str
    sha256: str
    size: int
    files: tuple[FileEntry, ...]
    warnings: tuple[str, ...] = ()  # e.g. a [build] include pattern that matched no file


@dataclass(frozen=True)
class PackageInfo:
    name: str
    version: str
    sha256: str  # of the compressed bytes
    size: int  # of the compressed bytes
    unpacked_size: int  # sum of the sizes of every regular file, MANIFEST.json included
    files: tuple[FileEntry, ...]  # from the verified MANIFEST.json (MANIFEST.json itself not listed)
    manifest_text: str  # extension.toml
    readme_text: str | None  # the README named by extension.toml, at most README_MAX_BYTES
    manifest: Manifest  # extension.toml, parsed and validated (once, while the package was read)
    tar_sha256: str = ""  # of the uncompressed tar (the OCI layer's DiffID)


# --------------------------------------------------------------------------------------------------
# Names


def _display(name: str) -> str:
    """A printable spelling of a member name: invalid UTF-8 bytes as ``\\xNN``, control characters
    escaped."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def _fold(path: str) -> str:
    """The key under which two paths are the same file on a case-insensitive, normalising file system."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", path).casefold())


def _too_large(message: str, *, path: str, limit: str, value: int) -> ArchiveTooLargeError:
    return ArchiveTooLargeError(message, path=path, limit=limit, value=value)


def _split_name(name: str, limits: Limits) -> tuple[str, ...]:
    """Check a member name and return its components (``.`` and empty components dropped)."""
    shown = _display(name)
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsafeArchiveError(f"the member name is not valid UTF-8; {_ALLOWED_NAMES}", path=shown) from None
    if "\x00" in name:
        raise UnsafeArchiveError(f"the member name contains a NUL byte; {_ALLOWED_NAMES}", path=shown)
    if "\\" in name:
        raise UnsafeArchiveError(f"the member name contains a backslash; {_ALLOWED_NAMES} (never `\\`)", path=shown)
    if name.startswith("/"):
        raise UnsafeArchiveError(f"the member name is an absolute path; {_ALLOWED_NAMES}", path=shown)
    if len(raw) > limits.max_path_bytes:
        raise _too_large(
            f"the member path is {len(raw)} bytes long; allowed: at most {limits.max_path_bytes} bytes",
            path=shown,
            limit="max_path_bytes",
            value=len(raw),
        )
    parts = name.split("/")
    if ".." in parts:
        raise UnsafeArchiveError(f"the member name has a `..` component; {_ALLOWED_NAMES}", path=shown)
    kept = tuple(p for p in parts if p not in ("", "."))
    if len(kept) > limits.max_depth:
        raise _too_large(
            f"the member path is {len(kept)} levels deep; allowed: at most {limits.max_depth}",
            path=shown,
            limit="max_depth",
            value=len(kept),
        )
    return kept


class _PathRegistry:
    """Refuses duplicate paths, a path that is both a file and a directory, and paths that collide
    after NFC normalisation and case folding (directories implied by deeper paths count too)."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[str, bool, bool]] = {}  # key -> (path, is_dir, explicit)

    def add(self, parts: Sequence[str], *, is_dir: bool, shown: str) -> None:
        for i in range(1, len(parts)):
            self._add("/".join(parts[:i]), is_dir=True, explicit=False, shown=shown)
        self._add("/".join(parts), is_dir=is_dir, explicit=True, shown=shown)

    def _add(self, path: str, *, is_dir: bool, explicit: bool, shown: str) -> None:
        key = _fold(path)
        seen = self._seen.get(key)
        if seen is None:
            self._seen[key] = (path, is_dir, explicit)
            return
        seen_path, seen_dir, seen_explicit = seen
        if seen_path != path:
            raise UnsafeArchiveError(
                f"`{path}` collides with `{_display(seen_path)}` after Unicode NFC normalisation and "
                "case folding; allowed: paths that stay distinct on case-insensitive file systems",
                path=shown,
            )
        if is_dir and seen_dir:
            if explicit and seen_explicit:
                raise UnsafeArchiveError(
                    "the directory appears twice in the archive; allowed: each path once", path=shown
                )
            if explicit:
                self._seen[key] = (path, True, True)
            return
        if is_dir != seen_dir:
            raise UnsafeArchiveError(
                f"`{_display(path)}` is both a file and a directory; allowed: each path once", path=shown
            )
        raise UnsafeArchiveError("duplicate path: the file appears twice; allowed: each path once", path=shown)


def _readme_parts(readme: str) -> tuple[str, ...] | None:
    """The README path named by the manifest as components, or None when it cannot be inside."""
    pure = PurePosixPath(readme)
    if not readme or pure.is_absolute() or "\\" in readme or ".." in pure.parts:
        return None
    parts = tuple(p for p in pure.parts if p not in ("", "."))
    return parts or None


def _decode_readme(data: bytes) -> str:
    """UTF-8 with replacement characters, at most README_MAX_BYTES, no split character at the end."""
    if len(data) <= README_MAX_BYTES:
        return data.decode("utf-8", "replace")
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    return decoder.decode(data[:README_MAX_BYTES], final=False)


def _top_for(manifest: Manifest) -> str:
    return f"{manifest.name}-{manifest.version}"
