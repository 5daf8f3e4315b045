"""The build provenance as an OCI referrer (SPEC 7): ``GET /v2/extensions/NAME/referrers/DIGEST``
lists, for a version's manifest (plain or yanked), one image manifest whose ``subject`` is that
manifest, ``artifactType`` ``application/vnd.in-toto+json``, config the empty blob, and one layer:
the DSSE envelope (``application/vnd.dsse.envelope.v1+json``), the same bytes the provenance
endpoint and the signed index serve. The referrer manifests' digests are stored with the statement
(`Provenance.oci_referrer_sha256`, `oci_yanked_referrer_sha256`), so each lookup is one indexed
query; what is served by digest is checked against the digest first."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.db.models import Q

from extensions.oci import (
    EMPTY_DOCUMENT,
    PROVENANCE_ARTIFACT_TYPE,
    Document,
    parse_sha256_digest,
    referrer_manifest,
)
from extensions.provenance import ENVELOPE_MEDIA_TYPE, PREDICATE_TYPE
from registry.oci import Blob, Subject, version_subjects
from registry.provenance.models import Provenance

log = logging.getLogger(__name__)

CREATED = "org.opencontainers.image.created"
PREDICATE = "in-toto.io/predicate-type"


def referrer_document(subject: dict[str, Any], envelope: bytes, *, created: datetime) -> Document:
    """The referrer manifest of ``envelope`` (made at ``created``) for the manifest ``subject`` (its descriptor)."""
    return referrer_manifest(
        subject,
        artifact_type=PROVENANCE_ARTIFACT_TYPE,
        layers=[Document(ENVELOPE_MEDIA_TYPE, envelope)],
        annotations={CREATED: created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), PREDICATE: PREDICATE_TYPE},
    )


def referrer_digests(version: Any, envelope: bytes, *, created: datetime) -> tuple[str, str]:
    """The hex digests of the referrer manifests for the version's plain and yanked manifests
    ("" for both while it has no OCI manifest)."""
    subjects = version_subjects(version)
    if not subjects:
        return "", ""
    plain, yanked = (
        referrer_document(s.descriptor(), envelope, created=created).digest.removeprefix("sha256:") for s in subjects
    )
    return plain, yanked


class ProvenanceReferrers:
    """The `registry.oci.ReferrerSource` of the build provenance."""

    def referrers(self, subject: Subject) -> Iterable[Document]:
        row = Provenance.objects.filter(version_id=subject.version_id).only("envelope", "created_at").first()
        if row is None:
            return []
        return [referrer_document(subject.descriptor(), row.data, created=row.created_at)]

    def manifest(self, name: str, digest: str) -> Document | None:
        hex_digest = parse_sha256_digest(digest)
        if hex_digest is None:
            return None
        row = (
            Provenance.objects.filter(Q(oci_referrer_sha256=hex_digest) | Q(oci_yanked_referrer_sha256=hex_digest))
            .filter(version__extension__name=name)
            .only("version_id", "envelope", "created_at", "oci_yanked_referrer_sha256")
            .first()
        )
        if row is None:
            return None
        subjects = version_subjects(row.version_id)
        if not subjects:
            return None
        subject = subjects[1] if row.oci_yanked_referrer_sha256 == hex_digest else subjects[0]
        document = referrer_document(subject.descriptor(), row.data, created=row.created_at)
        if document.digest != digest:
            log.error(
                "the provenance referrer of %s %s renders as %s, not %s", name, subject.version, document.digest, digest
            )
            return None
        return document

    def blob(self, name: str, digest: str) -> Blob | None:
        hex_digest = parse_sha256_digest(digest)
        if hex_digest is None:
            return None
        if digest == EMPTY_DOCUMENT.digest:
            # The referrer manifests' config: served by every repository that has one.
            if Provenance.objects.filter(version__extension__name=name).exists():
                return Blob(digest=digest, size=EMPTY_DOCUMENT.size, data=EMPTY_DOCUMENT.data)
            return None
        row = Provenance.objects.filter(sha256=hex_digest, version__extension__name=name).only("envelope").first()
        if row is None:
            return None
        data = row.data
        return Blob(digest=digest, size=len(data), data=data)
