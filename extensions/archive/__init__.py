"""Building, inspecting and extracting extension packages (SPEC 2.4).

A package is ``NAME-VERSION.tar.gz``: a gzip-compressed POSIX tar whose members all lie under the top
directory ``NAME-VERSION/``, holding ``extension.toml`` and a ``MANIFEST.json`` that lists every other
file with its size and sha256.

Building (`select_files`, `build_package`) is reproducible: the same source gives the same bytes
whatever the file times, the umask, the owner or the order the file system lists entries in.

- Members are sorted by the bytes of their UTF-8 path. The builder emits a directory member for the top
  directory and for every directory that holds a packaged file (empty directories are not packaged),
  then the regular files; everything is under ``NAME-VERSION/``.
- Every member has mtime 0 (or ``SOURCE_DATE_EPOCH``), uid/gid 0, empty user and group names; files
  are 0644, or 0755 when any execute bit is set in the source; directories are 0755.
- The tar format is PAX throughout (``tarfile.PAX_FORMAT``): a plain ustar header, plus a PAX extended
  header only where ustar cannot say it (a path over 100 bytes, a non-ASCII path). Never GNU longnames.
- gzip: header mtime 0, no file name, compression level 6 (`COMPRESSLEVEL`, the level of ``gzip`` and
  ``tar czf``; level 9 costs about twice the time for ~1% smaller packages). The bytes are the same for
  the same zlib; zlib has not changed its output for a given level in decades.
- ``MANIFEST.json`` is ``json.dumps(..., sort_keys=True, indent=2)`` plus a newline, files sorted by
  path.

Inspecting and extracting (`inspect_package`, `safe_extract`, `extract_source_archive`) stream the
package once, never seeking and never holding a whole member in memory:

- the compressed bytes are read in 64 KiB chunks, hashed (the package's sha256) and counted against
  ``max_package_bytes``;
- gzip is decompressed here (not by ``tarfile``) with a bounded output per call, so the gzip CRC and
  length are verified, truncation is noticed, and every decompressed byte is counted: against
  ``max_unpacked_bytes`` plus the room tar headers may take (see `_tar_overhead`), whatever the member
  headers claim. A gzip bomb stops at the limit with memory bounded by the chunk size;
- member data is read in 64 KiB chunks and counted against ``max_unpacked_bytes`` (the sum of the
  regular files' sizes, what `PackageInfo.unpacked_size` reports);
- ``tarfile`` reads a PAX or GNU extended header whole and keeps global PAX records, so an extended
  header over 64 KiB (`_extended_header_cap`) is refused from its declared size before it is read,
  and ``tarfile``'s list of members is emptied as we go: memory stays bounded by a few chunks;
- every header is checked before its data is touched: the name (UTF-8, no NUL, no backslash, not
  absolute, no ``..``, at most ``max_path_bytes`` bytes and ``max_depth`` components, ``.``
  components dropped), the type (regular files and directories only; sparse files are refused), the
  single top directory, duplicates and collisions after NFC normalisation and case folding.

Which error for what: every ``Limits`` field that is exceeded raises `ArchiveTooLargeError`
(``archive_too_large``) with ``limit`` naming the field, including ``max_members``, ``max_path_bytes``
and ``max_depth``; anything that must never be extracted raises `UnsafeArchiveError`
(``unsafe_archive``); anything else that is not a well-formed package (not gzip, not tar, truncated,
empty, no ``extension.toml``, a missing or mismatching ``MANIFEST.json``) raises `ArchiveError`
(``invalid_archive``). An invalid ``extension.toml`` raises `ManifestError` from
`extensions.manifest.parse_manifest`. Each error names the member (``path``) and says what is allowed.

The README (`PackageInfo.readme_text`) is the file ``extension.toml`` names (``readme``, default
``README.md``), decoded as UTF-8 with replacement characters, truncated (never refused) at
`README_MAX_BYTES` (1 MiB): a long README is the author's business, the catalog only shows its start.
"""

from __future__ import annotations

from extensions.archive._common import (
    COMPRESSLEVEL,
    EXTENSION_TOML,
    MANIFEST_JSON,
    README_MAX_BYTES,
    BuiltPackage,
    FileEntry,
    Limits,
    PackageInfo,
)
from extensions.archive.build import Rebuilt, build_package, rebuild_check, select_files
from extensions.archive.inspect import (
    extract_source_archive,
    inspect_package,
    read_readme,
    safe_extract,
    uncompressed_sha256,
)

__all__ = [
    "COMPRESSLEVEL",
    "EXTENSION_TOML",
    "MANIFEST_JSON",
    "README_MAX_BYTES",
    "BuiltPackage",
    "FileEntry",
    "Limits",
    "PackageInfo",
    "Rebuilt",
    "build_package",
    "extract_source_archive",
    "inspect_package",
    "read_readme",
    "rebuild_check",
    "safe_extract",
    "select_files",
    "uncompressed_sha256",
]
