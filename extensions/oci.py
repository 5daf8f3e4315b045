"""Extension packages as OCI artifacts (SPEC 7): the documents the registry serves under ``/v2/``.

Every published version is an OCI image manifest in the repository ``extensions/NAME``, tagged with
its version (``+`` written ``_``: ``1.0.0+build.7`` is the tag ``1.0.0_build.7``)::

    manifest  application/vnd.oci.image.manifest.v1+json, artifactType
              application/vnd.provisioning.extension.v1
      config  application/vnd.oci.image.config.v1+json: an image config whose rootfs names the
              layer's DiffID (the sha256 of the uncompressed tar), os and architecture "unknown"
              (an extension runs anywhere; the value BuildKit gives attestation manifests), and the
              version's facts as config Labels (what ``skopeo inspect`` shows)
      layers  one application/vnd.oci.image.layer.v1.tar+gzip: the package itself, digest
              ``sha256:`` of its bytes, annotation org.opencontainers.image.title NAME-VERSION.tar.gz
              (the file name ``oras pull`` writes)

The documents are canonical JSON (keys sorted, no insignificant whitespace, UTF-8) rendered only
from facts that never change once a version is published (its name, version, package digest and
size, DiffID, description, type, license, authors, repository, homepage and publication time) —
nothing from the request or the registry's address — so the same version has the same config and
manifest digests forever, and a mirror can pin them. The registry renders the config once, when it
commits the version, and stores its bytes; the manifests are rendered from those bytes
(`manifest_document` takes the config), so nothing a database returns differently can move a digest.

A yanked version keeps its tag; its tag then names a second manifest, the same document plus the
annotation ``io.provisioning.extension.yanked: "true"`` (no reason and no time, so this one is
fixed too). The config and the layer are shared by both. The plain manifest's digest stays valid
for as long as the version exists (a mirror's pin keeps working after a yank); the yanked one
answers while the version is yanked. Changing anything this module renders changes every digest:
``tests/extensions/test_oci.py`` pins the bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "ARTIFACT_TYPE",
    "CONFIG_MEDIA_TYPE",
    "EMPTY_DOCUMENT",
    "INDEX_MEDIA_TYPE",
    "LAYER_MEDIA_TYPE",
    "MANIFEST_MEDIA_TYPE",
    "PROVENANCE_ARTIFACT_TYPE",
    "REPOSITORY_PREFIX",
    "Artifact",
    "Document",
    "accepts",
    "canonical_json",
    "config_document",
    "index_document",
    "is_digest",
    "manifest_document",
    "parse_sha256_digest",
    "referrer_descriptor",
    "referrer_manifest",
    "tag_for_version",
    "version_for_tag",
]

MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"
CONFIG_MEDIA_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
#: The artifact type of an extension version's manifest.
ARTIFACT_TYPE = "application/vnd.provisioning.extension.v1"
#: The artifact type the build provenance (SPEC 6.2) is listed under as a referrer.
PROVENANCE_ARTIFACT_TYPE = "application/vnd.in-toto+json"
#: Docker's manifest types: never served (a client that accepts only these gets MANIFEST_UNKNOWN).
DOCKER_MANIFEST_MEDIA_TYPES = (
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v1+prettyjws",
)

#: Repositories are ``extensions/NAME``.
REPOSITORY_PREFIX = "extensions/"

# Annotations (and config labels). org.opencontainers.image.* are the image-spec's pre-defined keys.
TITLE = "org.opencontainers.image.title"
CREATED = "org.opencontainers.image.created"
VERSION = "org.opencontainers.image.version"
DESCRIPTION = "org.opencontainers.image.description"
LICENSES = "org.opencontainers.image.licenses"
AUTHORS = "org.opencontainers.image.authors"
SOURCE = "org.opencontainers.image.source"
URL = "org.opencontainers.image.url"
EXTENSION_NAME = "io.provisioning.extension.name"
EXTENSION_TYPE = "io.provisioning.extension.type"
YANKED = "io.provisioning.extension.yanked"

#: distribution-spec: a tag is at most 128 characters of this grammar.
TAG_RE = re.compile(r"[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}\Z", re.ASCII)
#: image-spec descriptor.md: ``algorithm ":" encoded``.
DIGEST_RE = re.compile(r"[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+\Z", re.ASCII)
_SHA256_DIGEST_RE = re.compile(r"sha256:([0-9a-f]{64})\Z", re.ASCII)
MAX_REFERENCE_LENGTH = 256


# --------------------------------------------------------------------------------------------------
# Names, tags and digests


def tag_for_version(version: str) -> str:
    """The tag of a version: ``+`` (build metadata), which tags cannot hold, written ``_``."""
    return version.replace("+", "_")


def version_for_tag(tag: str) -> str:
    """The version a tag names (SemVer never holds ``_``, so the mapping is one to one)."""
    return tag.replace("_", "+")


def is_tag(reference: str) -> bool:
    return TAG_RE.match(reference) is not None


def is_digest(reference: str) -> bool:
    """Whether ``reference`` is a digest in the image-spec's grammar (any algorithm)."""
    return len(reference) <= MAX_REFERENCE_LENGTH and DIGEST_RE.match(reference) is not None


def parse_sha256_digest(reference: str) -> str | None:
    """The hex of a ``sha256:`` digest (64 lower-case hex digits), else None."""
    match = _SHA256_DIGEST_RE.match(reference)
    return match.group(1) if match else None


def accepts(header: str, media_type: str) -> bool:
    """Whether an ``Accept`` header admits ``media_type``: no header (or an empty one), the type
    itself, ``application/*`` or ``*/*``, each with a non-zero ``q``. Parameters other than ``q``
    are ignored, as distribution-spec asks of registries."""
    if not header.strip():
        return True
    wanted = media_type.lower()
    for item in header.split(","):
        media, *params = (part.strip() for part in item.split(";"))
        quality = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value.strip())
                except ValueError:
                    quality = 0.0
        if quality > 0 and media.lower() in (wanted, "*/*", f"{wanted.split('/', 1)[0]}/*"):
            return True
    return False


# --------------------------------------------------------------------------------------------------
# Documents


def canonical_json(value: Any) -> bytes:
    """Keys sorted, no insignificant whitespace, UTF-8: the same value always gives the same bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@dataclass(frozen=True)
class Document:
    """A JSON document served by digest (a manifest, a config blob, an index)."""

    media_type: str
    data: bytes

    @property
    def digest(self) -> str:
        return f"sha256:{hashlib.sha256(self.data).hexdigest()}"

    @property
    def size(self) -> int:
        return len(self.data)

    def descriptor(self, **extra: Any) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size, **extra}


#: The image-spec's empty blob ``{}``: the config of artifacts that have none (a referrer's).
EMPTY_DOCUMENT = Document(EMPTY_MEDIA_TYPE, b"{}")


def _rfc3339(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("a publication time must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Artifact:
    """The facts of a published version that its OCI documents are rendered from (all immutable)."""

    name: str
    version: str  # as published (may carry +build)
    type: str
    description: str
    sha256: str  # of the package (the layer)
    size: int
    tar_sha256: str  # of the uncompressed tar (the layer's DiffID)
    published_at: datetime
    license: str | None = None
    authors: tuple[str, ...] = field(default=())
    repository: str | None = None
    homepage: str | None = None

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}.tar.gz"

    @property
    def tag(self) -> str:
        return tag_for_version(self.version)

    def labels(self) -> dict[str, str]:
        """The annotations of the manifest (and labels of the config), those with a value."""
        values = {
            CREATED: _rfc3339(self.published_at),
            VERSION: self.version,
            DESCRIPTION: self.description,
            LICENSES: self.license,
            AUTHORS: ", ".join(self.authors),
            SOURCE: self.repository,
            URL: self.homepage,
            EXTENSION_NAME: self.name,
            EXTENSION_TYPE: self.type,
        }
        return {key: value for key, value in values.items() if value}


def config_document(artifact: Artifact) -> Document:
    """The image config blob: os and architecture ``unknown``, the DiffID, the labels (what the
    manifest's annotations repeat)."""
    if len(artifact.tar_sha256) != 64:
        raise ValueError(f"{artifact.name} {artifact.version}: no DiffID (the uncompressed tar's sha256)")
    config = {
        "architecture": "unknown",
        "os": "unknown",
        "created": _rfc3339(artifact.published_at),
        "config": {"Labels": artifact.labels()},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{artifact.tar_sha256}"]},
    }
    return Document(CONFIG_MEDIA_TYPE, canonical_json(config))


def manifest_document(config: Document, *, sha256: str, size: int, filename: str, yanked: bool = False) -> Document:
    """The image manifest of a version: its config blob, its package (``sha256``, ``size``) as the
    one layer titled ``filename``, the config's labels as annotations (plus
    ``io.provisioning.extension.yanked: "true"`` for the yanked form). Built from the config's
    bytes, so a stored config is all a registry needs to render the same manifest again."""
    labels = json.loads(config.data).get("config", {}).get("Labels", {})
    annotations = {str(key): str(value) for key, value in labels.items()}
    if yanked:
        annotations[YANKED] = "true"
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "artifactType": ARTIFACT_TYPE,
        "config": config.descriptor(),
        "layers": [
            {
                "mediaType": LAYER_MEDIA_TYPE,
                "digest": f"sha256:{sha256}",
                "size": size,
                "annotations": {TITLE: filename},
            }
        ],
        "annotations": annotations,
    }
    return Document(MANIFEST_MEDIA_TYPE, canonical_json(manifest))


def index_document(descriptors: Iterable[Mapping[str, Any]]) -> Document:
    """An image index of these descriptors (the referrers API's answer)."""
    index = {"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": [dict(d) for d in descriptors]}
    return Document(INDEX_MEDIA_TYPE, canonical_json(index))


def referrer_manifest(
    subject: Mapping[str, Any],
    *,
    artifact_type: str,
    layers: Iterable[Document],
    annotations: Mapping[str, str] | None = None,
) -> Document:
    """An image manifest that refers to ``subject`` (a manifest's descriptor): the shape in which an
    attachment (the build provenance) is listed by the referrers API. Its config is the empty
    blob; each layer keeps the media type of its document."""
    manifest: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "artifactType": artifact_type,
        "config": EMPTY_DOCUMENT.descriptor(),
        "layers": [layer.descriptor() for layer in layers],
        "subject": {key: subject[key] for key in ("mediaType", "digest", "size")},
    }
    if annotations:
        manifest["annotations"] = dict(annotations)
    return Document(MANIFEST_MEDIA_TYPE, canonical_json(manifest))


def referrer_descriptor(document: Document) -> dict[str, Any]:
    """The descriptor the referrers API lists for a referrer: its artifactType (else its config's
    media type, as distribution-spec says) and its annotations."""
    manifest = json.loads(document.data)
    descriptor = document.descriptor()
    artifact_type = manifest.get("artifactType") or (manifest.get("config") or {}).get("mediaType")
    if artifact_type:
        descriptor["artifactType"] = artifact_type
    if manifest.get("annotations"):
        descriptor["annotations"] = dict(manifest["annotations"])
    return descriptor
