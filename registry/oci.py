"""The catalog as an OCI registry (SPEC 7): the reads behind ``/v2/`` (views in registry.apis.oci),
and the documents stored when a version is committed.

Repositories are ``extensions/NAME``; a version is a manifest tagged with its version (``+`` written
``_``). When a version is committed (`version_store_documents`, in the publishing transaction) its
image config is rendered from its immutable facts (`extensions.oci`) and stored, with the digests of
the config and of its two manifests (plain, and the yanked form); the manifests are rendered from the
stored config on each read. So every lookup is one indexed query:

- a manifest by tag: the row of (extension name, canonical version), the unique index;
- a manifest by digest: ``oci_manifest_sha256`` (or, while the version is yanked,
  ``oci_yanked_manifest_sha256``); a blob: the package's ``sha256`` or ``oci_config_sha256``;
- a tag list: the extension's version strings, one column.

None of them loads a version's large columns (its manifest JSON, extension.toml, README HTML, file
list): `_rows` reads only the small ones (``only()``). What is served by digest is checked against
the digest before it leaves (a renderer that drifted from the stored digests answers 404 and logs an
error, never wrong bytes).

Errors are `OciError`s with an HTTP status and an OCI error code; the views render them in OCI's
format, ``{"errors": [{"code", "message", "detail"}]}``, never the registry's envelope.

Referrers: artifacts attached to a version's manifest (the build provenance, SPEC 6.2) come from the
`ReferrerSource`s in `REFERRER_SOURCES`. A source lists the referrer manifests of a subject and
serves those manifests and their blobs by digest; one registers with `register_referrer_source`
from its app's ``AppConfig.ready()`` (the provenance's: `registry.provenance.referrers`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from django.conf import settings
from django.db.models import Q, QuerySet

from extensions.archive import Limits, uncompressed_sha256
from extensions.errors import VersionError
from extensions.manifest import Manifest as ExtensionManifest
from extensions.names import NAME_RULE, is_valid_name, suggest_name
from extensions.oci import (
    CONFIG_MEDIA_TYPE,
    REPOSITORY_PREFIX,
    Artifact,
    Document,
    config_document,
    index_document,
    is_digest,
    is_tag,
    manifest_document,
    parse_sha256_digest,
    referrer_descriptor,
    tag_for_version,
    version_for_tag,
)
from extensions.versions import SemVer
from registry import storage
from registry.models import Extension, Version

log = logging.getLogger(__name__)

#: The most tags (or repositories) in one answer; more are a ``Link`` away.
MAX_PAGE = 1000
#: Tags named in the detail of a MANIFEST_UNKNOWN for a tag.
MAX_TAGS_SHOWN = 20
TAG_RULE = (
    "a tag is a version with '+' written '_' (1.28.0, 2.0.0-rc.1, 1.0.0_build.7), "
    "and a digest is sha256: and 64 lower-case hex digits"
)


class OciError(Exception):
    """An error answered in OCI's format: the HTTP status, the OCI code, a message that says what
    was wrong and what is allowed, a detail (any JSON), and headers of the answer."""

    def __init__(
        self, status: int, code: str, message: str, detail: Any = None, *, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.detail = detail if detail is not None else {}
        self.headers = headers or {}

    def body(self) -> bytes:
        """OCI's error document for it."""
        return json.dumps({"errors": [{"code": self.code, "message": self.message, "detail": self.detail}]}).encode()


# --- repositories -----------------------------------------------------------------------------------


def extension_name(repository: str) -> str:
    """The extension a repository name denotes, or NAME_UNKNOWN saying what the names are."""
    if not repository.startswith(REPOSITORY_PREFIX):
        raise OciError(
            404,
            "NAME_UNKNOWN",
            f"no repository {repository[:120]!r}: this registry's repositories are {REPOSITORY_PREFIX}NAME, "
            "one per extension",
            {"repository": repository[:120]},
        )
    name = repository[len(REPOSITORY_PREFIX) :]
    if not is_valid_name(name):
        suggestion = suggest_name(name)
        hint = f"; did you mean {REPOSITORY_PREFIX}{suggestion}?" if suggestion and suggestion != name else ""
        raise OciError(
            404,
            "NAME_UNKNOWN",
            f"no repository {repository[:120]!r}: {name[:80]!r} is not a valid extension name ({NAME_RULE}){hint}",
            {"repository": repository[:120], **({"suggestion": f"{REPOSITORY_PREFIX}{suggestion}"} if hint else {})},
        )
    return name


def _name_unknown(name: str) -> OciError:
    return OciError(
        404,
        "NAME_UNKNOWN",
        f"no repository {REPOSITORY_PREFIX}{name}: there is no extension named {name!r} in this registry",
        {"repository": f"{REPOSITORY_PREFIX}{name}"},
    )


def _require_repository(name: str) -> None:
    if not Extension.objects.filter(name=name).exists():
        raise _name_unknown(name)


@dataclass(frozen=True)
class Page:
    """One page of a list, and the ``last`` of the next page (None when this is the last one)."""

    items: list[str]
    next_last: str | None


def _lexical(text: str) -> tuple[str, str]:
    """distribution-spec's order: lexical, case-insensitive (ties by the exact text)."""
    return text.lower(), text


def _page(items: list[str], *, n: int | None, last: str | None) -> Page:
    if last is not None:
        after = _lexical(last)
        items = [item for item in items if _lexical(item) > after]
    limit = MAX_PAGE if n is None else min(n, MAX_PAGE)
    page = items[:limit]
    return Page(page, page[-1] if limit and len(items) > limit else None)


def repositories_page(*, n: int | None, last: str | None) -> Page:
    """``GET /v2/_catalog``: every repository in lexical order (names are lower-case ASCII, so the
    database's order is that order)."""
    query = Extension.objects.order_by("name").values_list("name", flat=True)
    if last is not None:
        if last.startswith(REPOSITORY_PREFIX):
            query = query.filter(name__gt=last[len(REPOSITORY_PREFIX) :])
        elif last >= REPOSITORY_PREFIX:
            query = query.none()
    limit = MAX_PAGE if n is None else min(n, MAX_PAGE)
    names = list(query[: limit + 1]) if limit else []
    page = [f"{REPOSITORY_PREFIX}{name}" for name in names[:limit]]
    return Page(page, page[-1] if len(names) > limit else None)


def tags_page(name: str, *, n: int | None, last: str | None) -> Page:
    """``GET /v2/extensions/NAME/tags/list``: the versions as tags, in lexical order. A version
    longer than a tag may be (128 characters) has no tag; it is still there by digest."""
    versions = list(Version.objects.filter(extension__name=name).values_list("version", flat=True))
    if not versions:
        _require_repository(name)
    tags = sorted((tag for tag in map(tag_for_version, versions) if is_tag(tag)), key=_lexical)
    return _page(tags, n=n, last=last)


# --- the rows and their documents -------------------------------------------------------------------

#: The small columns a document is rendered from (never manifest, manifest_text, readme_html, files).
_COLUMNS = (
    "pk",
    "extension_id",
    "extension__name",
    "version",
    "sha256",
    "size",
    "storage_key",
    "yanked",
    "oci_config",
    "oci_config_sha256",
    "oci_manifest_sha256",
    "oci_yanked_manifest_sha256",
)


def _rows() -> QuerySet[Version]:
    return Version.objects.select_related("extension").only(*_COLUMNS)


def _filename(row: Version) -> str:
    return f"{row.extension.name}-{row.version}.tar.gz"


def _config(row: Version) -> Document:
    return Document(CONFIG_MEDIA_TYPE, row.oci_config.encode("utf-8"))


def _manifest(row: Version, *, yanked: bool) -> Document:
    return manifest_document(_config(row), sha256=row.sha256, size=row.size, filename=_filename(row), yanked=yanked)


def _manifest_query(name: str, hex_digest: str) -> QuerySet[Version]:
    """The version whose plain manifest has this digest, or whose yanked one has it while yanked."""
    return _rows().filter(
        Q(oci_manifest_sha256=hex_digest) | Q(oci_yanked_manifest_sha256=hex_digest, yanked=True),
        extension__name=name,
    )


@dataclass(frozen=True)
class Manifest:
    """A manifest to serve, and whether it was asked for by digest (immutable) or by tag."""

    document: Document
    by_digest: bool


def _unavailable(row: Version) -> OciError:
    return OciError(
        404,
        "MANIFEST_UNKNOWN",
        f"{row.extension.name} {row.version} has no OCI manifest yet: its config was never recorded "
        "(the registry's operator runs `manage.py migrate`)",
        {"tag": tag_for_version(row.version)},
    )


def _digest_unknown(name: str, reference: str) -> OciError:
    return OciError(
        404,
        "MANIFEST_UNKNOWN",
        f"no manifest {reference[:80]} in {REPOSITORY_PREFIX}{name}",
        {"digest": reference[:80]},
    )


def manifest_get(name: str, reference: str) -> Manifest:
    """``GET /v2/extensions/NAME/manifests/REFERENCE``: by digest or by tag."""
    hex_digest = parse_sha256_digest(reference)
    if hex_digest is not None:
        row = _manifest_query(name, hex_digest).first()
        if row is None:
            for source in REFERRER_SOURCES:
                document = source.manifest(name, reference)
                if document is not None and document.digest == reference:
                    return Manifest(document, by_digest=True)
            _require_repository(name)
            raise _digest_unknown(name, reference)
        if not row.oci_config:
            raise _unavailable(row)
        document = _manifest(row, yanked=row.oci_manifest_sha256 != hex_digest)
        if document.digest != reference:
            log.error("OCI manifest of %s %s renders as %s, not %s", name, row.version, document.digest, reference)
            raise _digest_unknown(name, reference)
        return Manifest(document, by_digest=True)
    if is_digest(reference):
        _require_repository(name)
        raise OciError(
            404,
            "MANIFEST_UNKNOWN",
            f"no manifest {reference[:80]} in {REPOSITORY_PREFIX}{name}: this registry's digests are sha256 "
            "(sha256: and 64 lower-case hex digits)",
            {"digest": reference[:80]},
        )
    row = _tagged(name, reference)
    if not row.oci_config:
        raise _unavailable(row)
    document = _manifest(row, yanked=row.yanked)
    stored = row.oci_yanked_manifest_sha256 if row.yanked else row.oci_manifest_sha256
    if document.digest != f"sha256:{stored}":
        log.error("OCI manifest of %s %s renders as %s, not sha256:%s", name, row.version, document.digest, stored)
    return Manifest(document, by_digest=False)


def _tagged(name: str, tag: str) -> Version:
    """The version a tag names (build metadata ignored, as everywhere: ``1.0.0_a`` finds ``1.0.0+b``)."""
    canonical: str | None = None
    if is_tag(tag):
        try:
            canonical = str(SemVer.parse(version_for_tag(tag)).without_build())
        except VersionError:
            canonical = None
    row = _rows().filter(extension__name=name, canonical=canonical).first() if canonical else None
    if row is not None:
        return row
    _require_repository(name)
    if canonical is None:
        raise OciError(
            404,
            "MANIFEST_UNKNOWN",
            f"no manifest {tag[:80]!r} in {REPOSITORY_PREFIX}{name}: it is neither a tag nor a digest ({TAG_RULE})",
            {"reference": tag[:80]},
        )
    versions = Version.objects.filter(extension__name=name).values_list("version", flat=True)
    newest = [tag_for_version(v) for v in sorted(versions, key=SemVer.parse, reverse=True)]
    newest = [t for t in newest if is_tag(t)]
    shown = newest[:MAX_TAGS_SHOWN]
    raise OciError(
        404,
        "MANIFEST_UNKNOWN",
        f"{REPOSITORY_PREFIX}{name} has no tag {tag}; its tags (the versions), newest first: {', '.join(shown)}"
        + (" ..." if len(newest) > MAX_TAGS_SHOWN else ""),
        {"tag": tag, "tags": shown},
    )


# --- blobs ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Blob:
    """A blob to serve: rendered bytes (``data``), or a package in storage (``storage_key``), in
    which case ``version_id``/``extension_id`` name whose download a full GET counts."""

    digest: str
    size: int
    data: bytes | None = None
    storage_key: str | None = None
    filename: str = ""
    version_id: int | None = None
    extension_id: int | None = None


def _blob_unknown(name: str, digest: str, why: str = "") -> OciError:
    return OciError(
        404,
        "BLOB_UNKNOWN",
        f"no blob {digest[:80]} in {REPOSITORY_PREFIX}{name}{why}",
        {"digest": digest[:80]},
    )


def blob_get(name: str, digest: str) -> Blob:
    """``GET /v2/extensions/NAME/blobs/DIGEST``: a version's package (the layer) or config blob."""
    hex_digest = parse_sha256_digest(digest)
    if hex_digest is None:
        _require_repository(name)
        raise _blob_unknown(name, digest, ": this registry's digests are sha256 (sha256: and 64 lower-case hex digits)")
    row = _rows().filter(Q(sha256=hex_digest) | Q(oci_config_sha256=hex_digest), extension__name=name).first()
    if row is not None and row.sha256 == hex_digest:
        return Blob(
            digest=digest,
            size=int(row.size),
            storage_key=row.storage_key,
            filename=_filename(row),
            version_id=int(row.pk),
            extension_id=int(row.extension_id),
        )
    if row is not None and row.oci_config:
        document = _config(row)
        if document.digest == digest:
            return Blob(digest=digest, size=document.size, data=document.data)
        log.error("OCI config of %s %s renders as %s, stored as %s", name, row.version, document.digest, digest)
    for source in REFERRER_SOURCES:
        blob = source.blob(name, digest)
        if blob is not None:
            return blob
    _require_repository(name)
    raise _blob_unknown(name, digest)


# --- referrers --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subject:
    """A manifest that artifacts may refer to: a version's, plain or yanked."""

    name: str
    version: str
    version_id: int
    manifest: Document

    def descriptor(self) -> dict[str, Any]:
        return self.manifest.descriptor()


class ReferrerSource(Protocol):
    """Artifacts attached to versions' manifests (the build provenance: issue 12).

    ``referrers`` gives the image manifests whose ``subject`` is ``subject`` (build them with
    `extensions.oci.referrer_manifest`); ``manifest`` and ``blob`` serve those manifests and the
    blobs they name, by digest, in the repository ``extensions/NAME`` (None: not one of this
    source's). Each is asked only after the versions' own documents did not match."""

    def referrers(self, subject: Subject) -> Iterable[Document]: ...

    def manifest(self, name: str, digest: str) -> Document | None: ...

    def blob(self, name: str, digest: str) -> Blob | None: ...


#: The sources of referrers, asked in order (the build provenance's, `registry.provenance.referrers`,
#: registered by its app).
REFERRER_SOURCES: list[ReferrerSource] = []


def version_subjects(version: Version | int) -> list[Subject]:
    """A version's manifests (a row, or its id), plain then yanked, as the subjects referrers name
    (none while the version has no OCI config)."""
    if isinstance(version, int):
        found = _rows().filter(pk=version).first()
        if found is None:
            return []
        version = found
    if not version.oci_config:
        return []
    return [
        Subject(
            name=version.extension.name,
            version=version.version,
            version_id=int(version.pk),
            manifest=_manifest(version, yanked=yanked),
        )
        for yanked in (False, True)
    ]


def register_referrer_source(source: ReferrerSource) -> None:
    if source not in REFERRER_SOURCES:
        REFERRER_SOURCES.append(source)


@dataclass(frozen=True)
class Referrers:
    index: Document
    filtered: bool


def referrers_get(name: str, digest: str, *, artifact_type: str | None) -> Referrers:
    """``GET /v2/extensions/NAME/referrers/DIGEST[?artifactType=T]``: an image index of the
    manifests that refer to DIGEST (empty when none do, or DIGEST is no manifest here)."""
    if not is_digest(digest):
        raise OciError(
            400,
            "DIGEST_INVALID",
            f"{digest[:80]!r} is not a digest: use sha256: and 64 lower-case hex digits (a manifest's digest)",
            {"digest": digest[:80]},
        )
    descriptors: list[dict[str, Any]] = []
    hex_digest = parse_sha256_digest(digest)
    row = _manifest_query(name, hex_digest).first() if REFERRER_SOURCES and hex_digest else None
    if row is None:
        _require_repository(name)
    elif row.oci_config:
        manifest = _manifest(row, yanked=row.oci_manifest_sha256 != hex_digest)
        subject = Subject(name=name, version=row.version, version_id=int(row.pk), manifest=manifest)
        for source in REFERRER_SOURCES:
            descriptors.extend(referrer_descriptor(document) for document in source.referrers(subject))
    if artifact_type is not None:
        descriptors = [d for d in descriptors if d.get("artifactType") == artifact_type]
    return Referrers(index_document(descriptors), filtered=artifact_type is not None)


# --- the stored documents --------------------------------------------------------------------------


def _documents(artifact: Artifact) -> dict[str, str]:
    """The columns of a version's OCI documents: the config's text, its digest, the manifests'."""

    def hex_of(document: Document) -> str:
        return document.digest.removeprefix("sha256:")

    config = config_document(artifact)

    def manifest(yanked: bool) -> Document:
        return manifest_document(
            config, sha256=artifact.sha256, size=artifact.size, filename=artifact.filename, yanked=yanked
        )

    return {
        "oci_config": config.data.decode("utf-8"),
        "oci_config_sha256": hex_of(config),
        "oci_manifest_sha256": hex_of(manifest(False)),
        "oci_yanked_manifest_sha256": hex_of(manifest(True)),
    }


def _artifact(*, name: str, row: Any, manifest: dict[str, Any], tar_sha256: str) -> Artifact:
    """The facts of a version row (the model's, or a migration's historical one) and its manifest
    (`extensions.manifest.Manifest.to_dict()`, as stored)."""
    authors = manifest.get("authors")
    return Artifact(
        name=name,
        version=row.version,
        type=row.type,
        description=row.description,
        sha256=row.sha256,
        size=int(row.size),
        tar_sha256=tar_sha256,
        published_at=row.published_at,
        license=manifest.get("license") or None,
        authors=tuple(str(a) for a in authors if a) if isinstance(authors, list) else (),
        repository=manifest.get("repository") or None,
        homepage=manifest.get("homepage") or None,
    )


def version_store_documents(*, version: Version, manifest: ExtensionManifest, tar_sha256: str) -> None:
    """Render and store a version's OCI config and digests (in the publishing transaction, after
    the row is created: the publication time is one of the facts)."""
    if not tar_sha256:
        log.error("%s %s: no DiffID from the inspection; it has no OCI manifest", manifest.name, version.version)
        return
    artifact = _artifact(name=manifest.name, row=version, manifest=manifest.to_dict(), tar_sha256=tar_sha256)
    columns = _documents(artifact)
    Version.objects.filter(pk=version.pk).update(**columns)
    for key, value in columns.items():
        setattr(version, key, value)


def backfill(version_model: type[Any], *, progress: Callable[[str], None] | None = None) -> int:
    """Render and store the OCI config and digests of every version that lacks them, reading each
    package once from storage for its DiffID (the migration that introduced them runs this); the
    number of versions updated."""
    limits = Limits(
        max_package_bytes=settings.REGISTRY_MAX_PACKAGE_BYTES,
        max_unpacked_bytes=settings.REGISTRY_MAX_UNPACKED_BYTES,
        max_members=settings.REGISTRY_MAX_MEMBERS,
    )
    updated = 0
    for row in version_model.objects.filter(oci_config="").select_related("extension").iterator():
        with storage.open_file(row.storage_key) as handle:
            tar_sha256 = uncompressed_sha256(handle, limits=limits)
        manifest = row.manifest if isinstance(row.manifest, dict) else {}
        artifact = _artifact(name=row.extension.name, row=row, manifest=manifest, tar_sha256=tar_sha256)
        version_model.objects.filter(pk=row.pk).update(**_documents(artifact))
        updated += 1
        if progress is not None:
            progress(f"{row.extension.name} {row.version}")
    return updated
