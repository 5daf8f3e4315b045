"""What the signed index signs: its target kinds. Each kind says which targets an extension has
(path, digest, length), which targets the registry has that belong to no extension (its
provenance key), and where the bytes of one are kept. Adding a kind is one class here and one
entry in `KINDS`; publishing, yanking, ``trust init``, the integrity check and the /tuf/targets/
view all go through this table.

Target paths (and, with consistent snapshots, the file names clients fetch):

- ``index/NAME.json``                            served as ``index/<sha256>.NAME.json``
- ``packages/NAME/NAME-VERSION.tar.gz``          served as ``packages/NAME/<sha256>.NAME-VERSION.tar.gz``
- ``provenance/NAME/NAME-VERSION.intoto.json``   served as ``provenance/NAME/<sha256>.NAME-VERSION.intoto.json``
- ``keys/provenance.pub``                        served as ``keys/<sha256>.provenance.pub`` (no extension's)
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from registry import storage
from registry.models import Extension, Version
from registry.provenance.models import Provenance, ProvenanceKey

TARGETS_PREFIX = "tuf/targets"


@dataclass(frozen=True)
class Target:
    path: str
    kind: str
    extension: str  # "" for a target of the registry's own (its provenance key)
    sha256: str
    length: int
    # The bytes to keep under tuf/targets/ (None: they are kept elsewhere, e.g. the package object).
    data: bytes | None = None


class TargetKind:
    """One kind of target. ``name`` is the first segment of its paths."""

    name: str = ""
    media_type: str = "application/json"  # of its stored bytes

    def targets(self, extension: Extension, versions: Iterable[Version]) -> Iterator[Target]:
        raise NotImplementedError

    def registry_targets(self) -> Iterator[Target]:
        """The targets of this kind that belong to no extension."""
        return iter(())

    def storage_key(self, path: str, sha256: str) -> str:
        """Where the bytes of the target ``path`` with this digest are kept."""
        directory, _, basename = path.rpartition("/")
        return f"{TARGETS_PREFIX}/{directory}/{sha256}.{basename}"


class IndexDocuments(TargetKind):
    """An extension's index document, exactly the bytes ``GET /api/v1/index/NAME`` answers."""

    name = "index"

    def targets(self, extension: Extension, versions: Iterable[Version]) -> Iterator[Target]:
        data = extension.index_json.encode("utf-8")
        if data:
            yield Target(
                f"index/{extension.name}.json", self.name, extension.name, extension.index_etag, len(data), data
            )


class Packages(TargetKind):
    """Every version's package (yanked ones too: they stay downloadable), kept where the package
    object already is (``sha256/ab/<sha256>.tar.gz``): nothing is copied."""

    name = "packages"
    media_type = "application/gzip"

    def targets(self, extension: Extension, versions: Iterable[Version]) -> Iterator[Target]:
        for version in versions:
            yield Target(
                f"packages/{extension.name}/{extension.name}-{version.version}.tar.gz",
                self.name,
                extension.name,
                version.sha256,
                version.size,
            )

    def storage_key(self, path: str, sha256: str) -> str:
        return storage.package_key(sha256)


class ProvenanceStatements(TargetKind):
    """Every version's signed provenance (SPEC 6.2): its DSSE envelope, exactly as
    ``GET /api/v1/extensions/NAME/versions/VERSION/provenance`` answers it."""

    name = "provenance"
    media_type = "application/vnd.in-toto+json"

    def targets(self, extension: Extension, versions: Iterable[Version]) -> Iterator[Target]:
        by_id = {version.pk: version for version in versions}
        rows = Provenance.objects.filter(version__extension_id=extension.pk).values_list(
            "version_id", "sha256", "length", "envelope"
        )
        for version_id, sha256, length, envelope in rows:
            version = by_id.get(version_id)
            if version is not None:
                yield Target(
                    provenance_path(extension.name, version.version),
                    self.name,
                    extension.name,
                    sha256,
                    length,
                    envelope.encode("utf-8"),
                )


class RegistryKeys(TargetKind):
    """The registry's provenance public key (PEM), so that clients get it through the signed index."""

    name = "keys"
    media_type = "application/x-pem-file"

    def targets(self, extension: Extension, versions: Iterable[Version]) -> Iterator[Target]:
        return iter(())

    def registry_targets(self) -> Iterator[Target]:
        key = ProvenanceKey.objects.filter(retired_at__isnull=True).first()
        if key is not None:
            data = key.public_pem.encode("ascii")
            yield Target(PROVENANCE_KEY_PATH, self.name, "", hashlib.sha256(data).hexdigest(), len(data), data)


PROVENANCE_KEY_PATH = "keys/provenance.pub"


def provenance_path(name: str, version: str) -> str:
    return f"provenance/{name}/{name}-{version}.intoto.json"


KINDS: tuple[TargetKind, ...] = (IndexDocuments(), Packages(), ProvenanceStatements(), RegistryKeys())
BY_NAME = {kind.name: kind for kind in KINDS}

# A served target file name: DIRS/<sha256>.BASENAME (consistent snapshots), nothing else.
_SERVED = re.compile(
    r"(?P<dir>[a-z]+(?:/[a-z0-9][a-z0-9-]*)?)/(?P<sha>[0-9a-f]{64})\.(?P<base>[A-Za-z0-9][A-Za-z0-9.+_-]*)"
)


def extension_targets(extension: Extension, versions: Iterable[Version] | None = None) -> dict[str, Target]:
    """Every target of one extension, by path."""
    rows = list(extension.versions.all() if versions is None else versions)
    return {t.path: t for kind in KINDS for t in kind.targets(extension, rows)}


def registry_targets() -> dict[str, Target]:
    """Every target that belongs to no extension (the provenance key), by path."""
    return {t.path: t for kind in KINDS for t in kind.registry_targets()}


def parse_served(name: str) -> tuple[TargetKind, str, str] | None:
    """(kind, target path, sha256) of a served file name under /tuf/targets/, or None."""
    match = _SERVED.fullmatch(name)
    if match is None:
        return None
    kind = BY_NAME.get(match["dir"].split("/", 1)[0])
    if kind is None:
        return None
    return kind, f"{match['dir']}/{match['base']}", match["sha"]
