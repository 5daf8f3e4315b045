"""What the OCI tests share: reading OCI answers, the error format, and a referrer source.

`StatementSource` is a `registry.oci.ReferrerSource` as the build provenance (issue 12) will be
one: for each version manifest it renders a referrer manifest (an in-toto statement of the
version, artifact type application/vnd.in-toto+json, and an SBOM-like second one of another
type) with `extensions.oci.referrer_manifest`, and serves those manifests and their blobs by
digest. Register it with ``monkeypatch.setattr(registry.oci, "REFERRER_SOURCES", [source])``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from extensions.oci import EMPTY_DOCUMENT, PROVENANCE_ARTIFACT_TYPE, Document, referrer_manifest
from registry.oci import Blob, Subject

#: distribution-spec 1.1, "Error Codes": the only codes an error body may carry (plus the 503 and
#: 500 codes of the distribution registry, UNAVAILABLE and UNKNOWN, for outages).
OCI_CODES = {
    "BLOB_UNKNOWN",
    "BLOB_UPLOAD_INVALID",
    "BLOB_UPLOAD_UNKNOWN",
    "DIGEST_INVALID",
    "MANIFEST_BLOB_UNKNOWN",
    "MANIFEST_INVALID",
    "MANIFEST_UNKNOWN",
    "NAME_INVALID",
    "NAME_UNKNOWN",
    "SIZE_INVALID",
    "UNAUTHORIZED",
    "DENIED",
    "UNSUPPORTED",
    "TOOMANYREQUESTS",
}
MANIFEST_ACCEPT = "application/vnd.oci.image.manifest.v1+json"
SBOM_ARTIFACT_TYPE = "application/spdx+json"


def sha256_digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def body_of(response: Any) -> bytes:
    """The bytes of an answer, streamed or not."""
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)
    return bytes(response.content)


def oci_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """Assert an OCI error answer (status, OCI's body, not the registry's envelope); the error."""
    assert response.status_code == status, (response.status_code, response.content[:500])
    assert response["Content-Type"] == "application/json"
    body = json.loads(response.content)
    assert set(body) == {"errors"}, body
    assert len(body["errors"]) == 1, body
    error = body["errors"][0]
    assert set(error) == {"code", "message", "detail"}, error
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"], error
    return dict(error)


class StatementSource:
    """A referrer source: two referrers per version manifest (see the module docstring)."""

    def __init__(self) -> None:
        self.documents: dict[tuple[str, str], Document] = {}
        self.asked: list[Subject] = []

    def _render(self, subject: Subject) -> list[Document]:
        statement = Document(
            PROVENANCE_ARTIFACT_TYPE,
            json.dumps({"subject": subject.name, "version": subject.version}, sort_keys=True).encode(),
        )
        sbom = Document(SBOM_ARTIFACT_TYPE, json.dumps({"name": subject.name}).encode())
        referrers = [
            referrer_manifest(
                subject.descriptor(),
                artifact_type=PROVENANCE_ARTIFACT_TYPE,
                layers=[statement],
                annotations={"org.opencontainers.image.created": "2024-01-01T00:00:00Z"},
            ),
            referrer_manifest(subject.descriptor(), artifact_type=SBOM_ARTIFACT_TYPE, layers=[sbom]),
        ]
        for document in (*referrers, statement, sbom, EMPTY_DOCUMENT):
            self.documents[(subject.name, document.digest)] = document
        return referrers

    def referrers(self, subject: Subject) -> list[Document]:
        self.asked.append(subject)
        return self._render(subject)

    def manifest(self, name: str, digest: str) -> Document | None:
        document = self.documents.get((name, digest))
        return document if document is not None and document.media_type.endswith("manifest.v1+json") else None

    def blob(self, name: str, digest: str) -> Blob | None:
        document = self.documents.get((name, digest))
        if document is None or document.media_type.endswith("manifest.v1+json"):
            return None
        return Blob(digest=digest, size=document.size, data=document.data)
