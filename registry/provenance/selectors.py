"""Reads of the build provenance: a version's statement, and what the version's API document (and
the catalog's version page) say of it."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from extensions.provenance import ProvenanceError, decode_payload, package_filename, summary
from registry import selectors
from registry.errors import NotFound
from registry.models import Version
from registry.provenance.models import Provenance
from registry.trust.targets import provenance_path


def provenance_of(version: Version) -> Provenance | None:
    try:
        return version.provenance
    except Provenance.DoesNotExist:
        return None


def provenance_get(*, name: str, version: str) -> Provenance:
    """A version's provenance (NotFound naming the version, or saying it has none)."""
    row = selectors.version_get(name=name, version=version)
    found = provenance_of(row)
    if found is None:
        raise NotFound(
            f"{name} {row.version} has no provenance: it was published before this registry had a provenance key "
            "(its operator runs `manage.py trust init --if-missing` to sign statements for such versions)"
        )
    return found


def provenance_link(version: Version, base: str) -> dict[str, Any] | None:
    """What the version's API document lists: where the provenance is, its digest (the ETag, and
    what the signed index lists under ``target``), and the subject it attests."""
    found = provenance_of(version)
    if found is None:
        return None
    name = version.extension.name
    url = base + reverse("version-provenance", kwargs={"name": name, "version": version.version})
    return {
        "url": url,
        "media_type": "application/vnd.in-toto+json",
        "sha256": found.sha256,
        "target": provenance_path(name, version.version),
        "subject": {"name": package_filename(name, version.version), "sha256": found.subject_sha256},
        "keyid": found.keyid,
    }


def provenance_summary(version: Version) -> dict[str, Any] | None:
    """The statement's facts for people (the catalog page): `extensions.provenance.summary` of the
    stored statement (the registry's own, so not verified again here)."""
    found = provenance_of(version)
    if found is None:
        return None
    try:
        return summary(decode_payload(found.data))
    except ProvenanceError:
        return None


def provenance_card(version: Version) -> dict[str, Any]:
    """What the catalog's version and extension pages show of a version's provenance: where the
    signed statement is, who published it and how (a trusted publisher's issuer and identity), from
    what upload, when, and the registry's reproducibility verdict (shown with or without a statement)."""
    name = version.extension.name
    card: dict[str, Any] = {
        "reproducible": version.reproducible,
        "reproducible_note": version.reproducible_note,
        "url": reverse("version-provenance", kwargs={"name": name, "version": version.canonical}),
        "verify": f"provisioning extension verify {name}@{version.canonical}",
        "statement": None,
    }
    facts = provenance_summary(version)
    if facts is None:
        return card
    publisher = _dict(facts.get("publisher"))
    trusted = _dict(publisher.get("trustedPublisher"))
    claims = _dict(trusted.get("claims"))
    identity = next((str(claims[c]) for c in ("repository", "project_path", "sub") if claims.get(c)), None)
    digest = _dict(_dict(facts.get("upload")).get("digest"))
    card["statement"] = {
        "kind": "source archive" if facts.get("kind") == "source" else "uploaded package",
        "upload_sha256": str(digest.get("sha256") or ""),
        "user": publisher.get("user"),
        "token": publisher.get("token"),
        "trusted_issuer": trusted.get("issuer"),
        "trusted_identity": identity,
        "finished": facts.get("finished"),
        "builder": facts.get("builder"),
    }
    return card


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
