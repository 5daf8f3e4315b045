"""`provisioning extension verify`: what the registry attests about a package, and whether an
infrastructure directory holds exactly what it signed (SPEC 6.2).

- ``extension verify NAME[@VERSION]``: the version's provenance, verified through the signed index
  (`clients.provenance`): who published it and how, from what upload, when, with which builder,
  whether the registry reproduced it and why not, what its dependencies resolved to.
- ``extension verify --infra DIR``: every extension DIR/extensions.lock pins, re-hashed: the locked
  sha256 against the signed index (and the package's provenance), the package (from the store, or
  downloaded) against that sha256, and each installed file against the package's own MANIFEST.json.
  Every difference is listed: ``modified``, ``missing``, ``extra`` (files or links the package does
  not have), ``unverified`` (the signed index or the provenance refuses it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clients.errors import ClientError, UsageError
from clients.lockfile import LOCKFILE_NAME, LockedExtension, Lockfile
from clients.provenance import VerifiedProvenance
from clients.registry_client import IntegrityError, RegistryClient, file_sha256
from clients.store import Store
from clients.trust import VerificationError
from extensions.archive import MANIFEST_JSON, inspect_package
from extensions.errors import ExtensionError
from extensions.index import parse_index
from extensions.kinds import plural
from extensions.providing import latest_version
from extensions.resolver import Candidate
from extensions.versions import SemVer

__all__ = ["Difference", "InfraCheck", "show", "verify_infra"]


def show(client: RegistryClient, name: str, version: str | None) -> VerifiedProvenance:
    """The verified provenance of NAME VERSION (default: its latest version, as the registry counts
    it), found through the (verified) index document."""
    if client.provenance is None:
        raise UsageError("`extension verify NAME` shows what the registry signed; it cannot run with --no-verify")
    chosen = _version(client, name, version)
    number = str(chosen.version)
    if client.trust is not None:
        client.trust.check_package(name, number, chosen.sha256)  # the package's signed target first
    return client.provenance.check(name, number, chosen.sha256)


def _version(client: RegistryClient, name: str, version: str | None) -> Candidate:
    document = client.index(name)
    if document is None:
        raise ClientError(f"no extension named {name!r} in the registry at {client.base_url}", code="not_found")
    _, candidates = parse_index(document, name=name)
    if version is None:
        chosen = latest_version(candidates) or (max(candidates, key=lambda c: c.version) if candidates else None)
        if chosen is None:
            raise ClientError(f"{name} has no versions in the registry at {client.base_url}", code="not_found")
        return chosen
    wanted = SemVer.parse(version).without_build()
    for candidate in candidates:
        if candidate.version.without_build() == wanted:
            return candidate
    shown = ", ".join(str(c.version) for c in sorted(candidates, key=lambda c: c.version, reverse=True)[:20])
    raise ClientError(
        f"{name} has no version {version} in the registry at {client.base_url}; its versions: {shown or 'none'}",
        code="not_found",
        details=[{"available": [str(c.version) for c in candidates]}],
    )


# --- provisioning extension verify --infra DIR --------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    """One way an installed extension is not what the registry signed: ``modified``, ``missing``,
    ``extra`` (a file, or a link, the package does not have) or ``unverified`` (its package or
    provenance does not verify against the signed index)."""

    extension: str
    version: str
    path: str
    status: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {
            "extension": self.extension,
            "version": self.version,
            "path": self.path,
            "status": self.status,
            "detail": self.detail,
        }


@dataclass
class InfraCheck:
    infra: Path
    checked: list[LockedExtension] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    verified: bool = True  # against the signed index (False with --no-verify)

    @property
    def ok(self) -> bool:
        return not self.differences

    def to_dict(self) -> dict[str, Any]:
        return {
            "infra": str(self.infra),
            "verified_against_signed_metadata": self.verified,
            "extensions": [{"name": e.name, "version": e.version, "sha256": e.sha256} for e in self.checked],
            "differences": [d.to_dict() for d in self.differences],
            "ok": self.ok,
        }


def verify_infra(client: RegistryClient, store: Store, infra: Path) -> InfraCheck:
    """Re-hash what DIR/extensions.lock says is installed: each package (its sha256 signed by the
    registry, its provenance verified; from the store or downloaded) and, file by file, the installed
    tree against the package's own MANIFEST.json. Every difference is listed."""
    lock = Lockfile.load(infra / LOCKFILE_NAME)
    report = InfraCheck(infra=infra, verified=client.trust is not None)
    for entry in lock.extensions:
        report.checked.append(entry)
        try:
            package = store.fetch(client, entry.name, entry.version, entry.sha256)
            expected = {f.path: (f.size, f.sha256) for f in inspect_package(package).files}
        except (VerificationError, IntegrityError) as exc:
            report.differences.append(Difference(entry.name, entry.version, "", "unverified", exc.message))
            continue
        except ExtensionError as exc:
            report.differences.append(Difference(entry.name, entry.version, "", "unverified", str(exc)))
            continue
        root = infra / "extensions" / plural(entry.type) / entry.name
        report.differences.extend(_compare(entry, root, expected))
    return report


def _compare(entry: LockedExtension, root: Path, expected: dict[str, tuple[int, str]]) -> Iterator[Difference]:
    def diff(path: str, status: str, detail: str) -> Difference:
        return Difference(entry.name, entry.version, path, status, detail)

    if not root.is_dir() or root.is_symlink():
        yield diff("", "missing", f"{root} is not installed")
        return
    present: set[str] = set()
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files) + [d for d in dirs if Path(folder, d).is_symlink()]:
            path = Path(folder, name)
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                yield diff(rel, "extra", "a link; the package holds none")
                continue
            if rel == MANIFEST_JSON:
                present.add(rel)
                problem = _manifest_problem(path, entry, expected)
                if problem:
                    yield diff(rel, "modified", problem)
                continue
            if rel not in expected:
                yield diff(rel, "extra", "not a file of the package")
                continue
            present.add(rel)
            size, sha256 = expected[rel]
            actual_size = path.stat().st_size
            if actual_size != size:
                yield diff(rel, "modified", f"{actual_size} bytes; the package's is {size} bytes")
            elif (actual := file_sha256(path)) != sha256:
                yield diff(rel, "modified", f"sha256 {actual}; the package's is {sha256}")
    for rel in sorted({*expected, MANIFEST_JSON} - present):
        yield diff(rel, "missing", "in the package, not installed")


def _manifest_problem(path: Path, entry: LockedExtension, expected: dict[str, tuple[int, str]]) -> str:
    """Why the installed MANIFEST.json is not the package's ('' when it lists the same files)."""
    try:
        document = json.loads(path.read_bytes())
        listed = {str(f["path"]): (int(f["size"]), str(f["sha256"])) for f in document["files"]}
    except (OSError, ValueError, KeyError, TypeError):
        return "not a valid MANIFEST.json"
    if document.get("name") != entry.name or listed != expected:
        return "does not list the package's files as the package's MANIFEST.json does"
    return ""
