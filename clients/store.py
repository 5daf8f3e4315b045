"""The local content-addressed store under ``PROVISIONING_HOME``::

    HOME/store/packages/sha256/ab/<sha256>.tar.gz    packages by digest (verified on the way in)
    HOME/store/trees/{type}/{name}/{version}/        unpacked with extensions.archive.safe_extract
    HOME/store/trees/{type}/{name}/.{version}.json   which package the tree came from
    HOME/cache/index/{host_port}/                    index documents and their ETags, per registry
    HOME/locks/                                      filelock files

Nothing is ever half-present: a package arrives through a temporary file renamed into place after
its sha256 was checked; a tree is extracted into a temporary directory renamed into place (the
foundation's `safe_extract`). Processes sharing a home coordinate with file locks, one per package
and one per tree, so two of them never download or unpack the same thing at once.

A stored package whose bytes no longer hash to its name was changed after it was verified: that is
reported (`IntegrityError`), never silently repaired, and never used. A tree is checked against its
MANIFEST.json (every file's size and sha256, nothing extra) each time it is used; a tree that does
not match is unpacked again from its verified package.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import filelock

from clients.errors import ClientError, home_unusable, os_error_message
from clients.files import atomic_write
from clients.registry_client import (
    CHUNK,
    IntegrityError,
    ProgressCallback,
    RegistryClient,
    check_sha256,
    file_sha256,
)
from extensions.archive import MANIFEST_JSON, safe_extract
from extensions.errors import ExtensionError
from extensions.kinds import TYPES as EXTENSION_TYPES
from extensions.kinds import plural
from extensions.names import NAME_RE
from extensions.versions import SemVer

__all__ = ["EXTENSION_TYPES", "IntegrityError", "Store", "kind_dir", "verify_tree"]


def kind_dir(type: str) -> str:
    """The plural directory name of a type: ``taskserv`` -> ``taskservs``."""
    if type not in EXTENSION_TYPES:
        raise ClientError(f"unknown extension type {type!r}: use one of {', '.join(EXTENSION_TYPES)}")
    return plural(type)


def _check_coordinates(type: str, name: str, version: str) -> None:
    kind_dir(type)
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ClientError(f"{name!r} is not an extension name: use lower-case letters, digits and '-'")
    try:
        SemVer.parse(version)
    except ExtensionError as exc:
        raise ClientError(f"{version!r} is not a version: {exc.message}") from None


@dataclass(frozen=True)
class TreeMark:
    """Which package a tree was unpacked from, and the digest of its MANIFEST.json."""

    sha256: str
    manifest_sha256: str


def verify_tree(root: Path, *, manifest_sha256: str | None = None) -> list[str]:
    """What is wrong with an unpacked tree: MANIFEST.json (whose own digest must be
    ``manifest_sha256`` when given) lists every regular file with its size and sha256; anything
    missing, changed or extra, and any link, is a problem. An empty list means the tree is intact."""
    root = Path(root)
    manifest_path = root / MANIFEST_JSON
    try:
        data = manifest_path.read_bytes()
    except OSError:
        return [f"{manifest_path} is missing"]
    if manifest_sha256 is not None and hashlib.sha256(data).hexdigest() != manifest_sha256:
        return [f"{manifest_path} was changed"]
    try:
        listed = {str(f["path"]): (int(f["size"]), str(f["sha256"])) for f in json.loads(data)["files"]}
    except (ValueError, KeyError, TypeError):
        return [f"{manifest_path} is not a valid MANIFEST.json"]
    problems: list[str] = []
    present: set[str] = set()
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        files.sort()
        for entry in [*dirs, *files]:
            path = Path(folder, entry)
            if path.is_symlink():
                problems.append(f"{path} is a link; the package holds none")
        for entry in files:
            path = Path(folder, entry)
            rel = path.relative_to(root).as_posix()
            if rel == MANIFEST_JSON or path.is_symlink():
                continue
            present.add(rel)
            if rel not in listed:
                problems.append(f"{path} is not part of the package")
                continue
            size, digest = listed[rel]
            if path.stat().st_size != size or file_sha256(path) != digest:
                problems.append(f"{path} was changed")
    problems.extend(f"{root / rel} is missing" for rel in sorted(set(listed) - present))
    return problems


class Store:
    """Packages by sha256 and their unpacked trees, under ``home``."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.root = self.home / "store"
        self.packages_dir = self.root / "packages" / "sha256"
        self.trees_dir = self.root / "trees"
        self.cache_dir = self.home / "cache"
        self.locks_dir = self.home / "locks"

    # --- locks ------------------------------------------------------------------------------------

    def lock(self, name: str) -> filelock.FileLock:
        """A cross-process lock ``HOME/locks/{name}.lock`` (re-entrant within a process)."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:200]
        with self.writing():
            self.locks_dir.mkdir(parents=True, exist_ok=True)
        return filelock.FileLock(self.locks_dir / f"{safe}.lock")

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """File system errors while writing under the home become a `ClientError` naming the home
        and the path (an unwritable or missing ``--home``, a full disk)."""
        try:
            yield
        except OSError as exc:
            raise home_unusable(self.home, exc) from None

    # --- packages ---------------------------------------------------------------------------------

    def package_path(self, sha256: str) -> Path:
        check_sha256(sha256)
        return self.packages_dir / sha256[:2] / f"{sha256}.tar.gz"

    def has_package(self, sha256: str) -> bool:
        """The package is present AND its bytes hash to ``sha256``."""
        path = self.package_path(sha256)
        return path.is_file() and file_sha256(path) == sha256

    def verified_package(self, sha256: str, *, what: str = "") -> Path | None:
        """The stored package if present and intact; None if absent; `IntegrityError` if its bytes
        were changed since they were verified."""
        path = self.package_path(sha256)
        if not path.is_file():
            return None
        actual = file_sha256(path)
        if actual != sha256:
            label = f" ({what})" if what else ""
            raise IntegrityError(
                f"the stored package {path}{label} does not match its sha256 {sha256} (it hashes to {actual}): "
                "it was changed after it was verified; delete the file to download it again"
            )
        return path

    def add_package(self, source: Path, sha256: str) -> Path:
        """Copy a package file into the store: hashed while copied to a temporary file beside its
        place, renamed into place only when the digest is ``sha256``."""
        target = self.package_path(sha256)
        try:
            handle = open(source, "rb")  # noqa: SIM115 - closed by the with below
        except OSError as exc:
            raise ClientError(f"cannot read {source}: {os_error_message(exc, about=Path(source))}") from None
        with handle, self.lock(f"package-{sha256}"), self.writing():
            if self.verified_package(sha256) is not None:
                return target
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
            try:
                digest = hashlib.sha256()
                with os.fdopen(fd, "wb") as out:
                    while chunk := handle.read(CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                if digest.hexdigest() != sha256:
                    raise IntegrityError(f"{source} has sha256 {digest.hexdigest()}, not {sha256}; it was not stored")
                os.replace(tmp, target)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        return target

    def fetch(
        self,
        client: RegistryClient | None,
        name: str,
        version: str,
        sha256: str,
        *,
        progress: ProgressCallback | None = None,
    ) -> Path:
        """The package from the store, or downloaded and verified into it. ``client`` None (or
        offline) means the store only."""
        what = f"{name} {version}"
        if client is not None:
            client.verify_package(name, version, sha256)  # against the signed index, before any use
        with self.lock(f"package-{sha256}"), self.writing():
            found = self.verified_package(sha256, what=what)
            if found is not None:
                if progress is not None:
                    size = found.stat().st_size
                    progress(size, size)
                return found
            if client is None:
                raise ClientError(
                    f"{what} (sha256 {sha256}) is not in the local store {self.root} and no registry may be asked",
                    code="not_found",
                )
            if client.offline:
                raise ClientError(
                    f"offline: {what} (sha256 {sha256}) is not in the local store {self.root}; "
                    "run without --offline to download it",
                    code="registry_unavailable",
                )
            return client.download(
                name, version, expected_sha256=sha256, target=self.package_path(sha256), progress=progress
            )

    # --- trees ------------------------------------------------------------------------------------

    def tree_path(self, type: str, name: str, version: str) -> Path:
        _check_coordinates(type, name, version)
        return self.trees_dir / type / name / version

    def _mark_path(self, type: str, name: str, version: str) -> Path:
        return self.trees_dir / type / name / f".{version}.json"

    def tree_mark(self, type: str, name: str, version: str) -> TreeMark | None:
        try:
            data = json.loads(self._mark_path(type, name, version).read_text(encoding="utf-8"))
            return TreeMark(sha256=str(data["sha256"]), manifest_sha256=str(data["manifest_sha256"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def tree(self, type: str, name: str, version: str, sha256: str) -> Path:
        """The unpacked tree of a stored package: reused when it came from this package and still
        matches its MANIFEST.json, else unpacked again (safe_extract into a temporary directory,
        renamed into place). The package itself must be in the store and intact."""
        dest = self.tree_path(type, name, version)
        what = f"{name} {version}"
        with self.lock(f"tree-{type}-{name}-{version}"), self.writing():
            package = self.verified_package(sha256, what=what)
            if package is None:
                raise ClientError(
                    f"{what} (sha256 {sha256}) is not in the local store {self.root}: fetch it first", code="not_found"
                )
            mark = self.tree_mark(type, name, version)
            if (
                mark is not None
                and mark.sha256 == sha256
                and dest.is_dir()
                and not verify_tree(dest, manifest_sha256=mark.manifest_sha256)
            ):
                return dest
            mark_path = self._mark_path(type, name, version)
            with contextlib.suppress(FileNotFoundError):
                mark_path.unlink()
            _remove_tree(dest)
            try:
                info = safe_extract(package, dest)
            except ExtensionError:
                # Bytes that cannot be unpacked here (unsafe, over the limits, not a package) are not
                # kept: every use of them would fail alike.
                _remove_tree(dest)
                with self.lock(f"package-{sha256}"), contextlib.suppress(FileNotFoundError):
                    package.unlink()
                raise
            if info.name != name or SemVer.parse(info.version) != SemVer.parse(version):
                _remove_tree(dest)  # the package is another extension's, intact: it stays
                raise IntegrityError(f"the package with sha256 {sha256} holds {info.name} {info.version}, not {what}")
            manifest_sha256 = file_sha256(dest / MANIFEST_JSON)
            payload = json.dumps({"sha256": sha256, "manifest_sha256": manifest_sha256}).encode()
            atomic_write(mark_path, payload, mode=0o644)
            return dest


def _remove_tree(path: Path) -> None:
    """Remove a directory so that it vanishes at once: renamed aside, then deleted."""
    if not os.path.lexists(path):
        return
    if path.is_symlink() or not path.is_dir():
        path.unlink()
        return
    aside = Path(tempfile.mkdtemp(prefix=".remove-", dir=path.parent))
    os.rename(path, aside / "tree")
    shutil.rmtree(aside, ignore_errors=True)
