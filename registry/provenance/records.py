"""Making, signing and storing provenance statements (SPEC 6.2), and the provenance key.

A statement (`extensions.provenance.statement`) attests one build: the package it produced (the
subject), the upload it was made from, the registry's builder and its version, who published it
(user, token prefix; a trusted publisher's verified claims), when, whether the registry reproduced
the package from its own files, and what the version's dependencies resolved to at that moment.

**Resolved dependencies.** A package does not contain its dependencies; what they *resolve to* at
publish time is still worth attesting (what the author could have tested against). It is the
shared resolver's answer for the version's own requirements, over the catalogue as it is just
before the commit (no runtime version, no pre-releases): every extension of the answer with its
version, package sha256 and download URL, the version's direct dependencies marked with their
constraint as written. When the resolver finds no answer (the requirements conflict with one
another, or the answer is too expensive to find), each direct dependency is recorded on its own as
the newest non-yanked version matching its constraint, and ``dependencyResolution`` says so and why.

The key is an Ed25519 key under ``REGISTRY_TUF_KEYS_DIR/provenance/<keyid>.pem`` (written by
``trust init``, replaced by ``trust rotate provenance``); its public half is the signed index's
target ``keys/provenance.pub``. Nothing here takes locks or re-signs the index: `services` does.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_pem_private_key
from django.conf import settings
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone
from securesystemslib.signer import CryptoSigner

from extensions.errors import ExtensionError
from extensions.manifest import Manifest
from extensions.provenance import BuildRecord, Publisher, ResolvedDependency, sign, statement
from extensions.resolver import resolve
from extensions.versions import Constraint, SemVer
from registry.models import Dependency, Version
from registry.provenance.models import Provenance, ProvenanceKey
from registry.provenance.referrers import referrer_digests
from registry.resolution import DatabaseCatalogue, download_url
from registry.trust import keys

log = logging.getLogger(__name__)

KEY_ROLE = "provenance"  # its folder under REGISTRY_TUF_KEYS_DIR
PACKAGE_FORMAT = "1"  # MANIFEST.json's format: what the builder writes


def builder_base() -> str:
    """The registry's public URL (REGISTRY_PUBLIC_URL); set it so that statements name the registry."""
    return str(settings.REGISTRY_PUBLIC_URL or "http://localhost")


def builder_id() -> str:
    """The builder id of every statement: the registry's pipeline, at its public URL."""
    return f"{builder_base()}/builder"


@functools.cache
def _registry_version() -> str:
    try:
        return importlib.metadata.version("provisioning-registry")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def builder_version() -> dict[str, str]:
    """The builder's version (read once per process: it is the installed code's)."""
    return {"provisioning-registry": _registry_version(), "packageFormat": PACKAGE_FORMAT}


# --- the build's facts --------------------------------------------------------------------------------


@dataclass(frozen=True)
class BuildFacts:
    """What the pipeline knows of a build that the version row does not: handed to the commit
    (`registry.services.version_create`), which attests it."""

    build_id: str
    kind: str  # "source" | "package"
    upload_name: str
    upload_sha256: str
    upload_size: int
    started: datetime
    publisher: Publisher
    dependencies: tuple[ResolvedDependency, ...] = ()
    dependency_resolution: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # further internalParameters (a backfill says so)


def _trusted_publisher(token: Any) -> dict[str, Any] | None:
    """The trusted publisher a token was answered for (SPEC 6.3: trusted publishing records it on
    the token, ``ApiToken.trusted_publisher`` and ``ApiToken.oidc_claims``, the JWT's verified
    claims), or None for an ordinary token."""
    if token is None:
        return None
    claims = getattr(token, "oidc_claims", None) or {}
    publisher = getattr(token, "trusted_publisher", None)
    if not claims and publisher is None:
        return None
    found: dict[str, Any] = {"claims": dict(claims) if isinstance(claims, dict) else {}}
    if publisher is not None:
        found["issuer"] = publisher.issuer
        found["audience"] = publisher.audience
    elif isinstance(claims, dict):
        found["issuer"] = claims.get("iss")
        found["audience"] = claims.get("aud")
    return found


def publisher_of(build: Any) -> Publisher:
    """Who submitted ``build`` (a `builds.models.Build`; read by attribute, so ``registry`` does not
    import ``builds``)."""
    user = build.submitted_by.get_username() if build.submitted_by is not None else None
    token = build.token if build.token_id is not None else None
    trusted = _trusted_publisher(token)
    prefix = build.token_prefix or None
    via = "trusted-publishing" if trusted is not None else ("token" if prefix else "no-token")
    return Publisher(user=user, via=via, token_prefix=prefix, trusted_publisher=trusted)


def build_facts(
    build: Any, *, dependencies: Sequence[tuple[str, str, str]], catalogue: DatabaseCatalogue | None = None
) -> BuildFacts:
    """The facts of ``build`` (a Build row), with what ``dependencies`` ((name, constraint, as
    written) of the version's requirements) resolve to now."""
    resolved, how = resolve_dependencies(dependencies, catalogue=catalogue)
    return BuildFacts(
        build_id=str(build.pk),
        kind=str(build.kind),
        upload_name=build.filename or "upload.tar.gz",
        upload_sha256=build.upload_sha256,
        upload_size=int(build.upload_size),
        started=build.started_at or build.created_at,
        publisher=publisher_of(build),
        dependencies=resolved,
        dependency_resolution=how,
    )


def resolve_dependencies(
    requirements: Sequence[tuple[str, str, str]], *, catalogue: DatabaseCatalogue | None = None
) -> tuple[tuple[ResolvedDependency, ...], dict[str, Any]]:
    """What the requirements (name, normal constraint, constraint as written) resolve to in the
    catalogue now, and how that was found (see the module's docstring)."""
    if not requirements:
        return (), {"method": "resolver", "requirements": []}
    written = {name: text for name, _, text in requirements}
    base = builder_base()
    try:
        resolution = resolve(
            [f"{name} {normal}" for name, normal, _ in requirements],
            catalogue or DatabaseCatalogue(),
            timeout=settings.REGISTRY_RESOLVE_TIMEOUT,
        )
    except ExtensionError as exc:
        found = []
        for name, normal, text in requirements:
            row = _newest_matching(name, normal)
            if row is not None:
                found.append(
                    ResolvedDependency(
                        name, row.version, row.sha256, download_url(base, name, row.version), constraint=text
                    )
                )
        how = {
            "method": "each dependency on its own (newest non-yanked version matching its constraint)",
            "reason": f"the resolver found no answer: {exc.message[:500]}",
            "requirements": [f"{name} {text}".strip() for name, _, text in requirements],
        }
        return tuple(found), how
    resolved = tuple(
        ResolvedDependency(
            name,
            str(candidate.version),
            candidate.sha256,
            download_url(base, name, str(candidate.version)),
            constraint=written.get(name),
        )
        for name in resolution.install_order
        for candidate in [resolution.resolved[name]]
    )
    how = {
        "method": "resolver",
        "requirements": [f"{name} {text}".strip() for name, _, text in requirements],
    }
    return resolved, how


def _newest_matching(name: str, constraint: str) -> Version | None:
    try:
        parsed = Constraint.parse(constraint, check_satisfiable=False)
    except ExtensionError:
        return None
    rows = [
        v
        for v in Version.objects.filter(extension__name=name, yanked=False).only("version", "sha256")
        if parsed.contains(v.version)
    ]
    return max(rows, key=lambda v: SemVer.parse(v.version)) if rows else None


def manifest_requirements(manifest: Manifest) -> list[tuple[str, str, str]]:
    """A manifest's requirements: (name, normal constraint, constraint as written)."""
    return [(d.name, str(d.constraint), d.constraint.written or str(d.constraint)) for d in manifest.dependencies]


def version_requirements(version: Version) -> list[tuple[str, str, str]]:
    """A committed version's requirements, from its dependency rows."""
    rows = Dependency.objects.filter(version=version).select_related("extension").order_by("extension__name")
    return [(d.extension.name, d.constraint, d.written or d.constraint) for d in rows]


# --- the statement ----------------------------------------------------------------------------------------


def build_record(version: Version, facts: BuildFacts, *, finished: datetime) -> BuildRecord:
    base = builder_base()
    log_uri = f"{base}{reverse('build-detail', kwargs={'build_id': facts.build_id})}" if facts.build_id else None
    return BuildRecord(
        name=version.extension.name,
        version=version.version,
        sha256=version.sha256,
        kind=facts.kind,
        upload_name=facts.upload_name,
        upload_sha256=facts.upload_sha256,
        upload_size=facts.upload_size,
        builder_id=builder_id(),
        builder_version=builder_version(),
        build_id=facts.build_id,
        started=facts.started,
        finished=finished,
        publisher=facts.publisher,
        dependencies=facts.dependencies,
        dependency_resolution=facts.dependency_resolution,
        reproducible=version.reproducible,
        reproducible_note=version.reproducible_note,
        build_log_uri=log_uri,
        extra=facts.extra,
    )


def envelope_for(version: Version, facts: BuildFacts, signer: CryptoSigner, *, finished: datetime) -> bytes:
    return sign(statement(build_record(version, facts, finished=finished)), signer)


def store(version: Version, envelope: bytes, *, keyid: str, new: bool = False) -> Provenance:
    """Record ``envelope`` as the version's provenance (in the caller's transaction). ``new``: the
    version was created in this transaction, so it has none yet (one INSERT, nothing read)."""
    now = timezone.now()
    existing = None if new else Provenance.objects.filter(version=version).only("created_at").first()
    created = existing.created_at if existing is not None else now
    plain, yanked = referrer_digests(version, envelope, created=created)
    fields = {
        "created_at": created,
        "envelope": envelope.decode("utf-8"),
        "sha256": hashlib.sha256(envelope).hexdigest(),
        "length": len(envelope),
        "keyid": keyid,
        "subject_sha256": version.sha256,
        "oci_referrer_sha256": plain,
        "oci_yanked_referrer_sha256": yanked,
        "signed_at": now,
    }
    if existing is None:
        return Provenance.objects.create(version=version, **fields)
    Provenance.objects.filter(version=version).update(**fields)
    return Provenance(version=version, **fields)


# --- the key ----------------------------------------------------------------------------------------------


def current_key() -> ProvenanceKey | None:
    return ProvenanceKey.objects.filter(retired_at__isnull=True).first()


def signer_of(key: ProvenanceKey) -> CryptoSigner:
    """The private key of ``key`` (keys.KeyProblem when its file is not on this machine)."""
    return keys.online_signers(KEY_ROLE, [key.keyid])[0]


def public_pem(signer: CryptoSigner) -> str:
    private = load_pem_private_key(signer.private_bytes, password=None)
    return private.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo).decode("ascii")


def create_key() -> tuple[ProvenanceKey, CryptoSigner]:
    """A new current key (the previous one, if any, retired), its file written. In a transaction."""
    signer = keys.generate()
    keys.write_online_key(KEY_ROLE, signer)
    ProvenanceKey.objects.filter(retired_at__isnull=True).update(retired_at=timezone.now())
    key = ProvenanceKey.objects.create(keyid=signer.public_key.keyid, public_pem=public_pem(signer))
    return key, signer


def key_path(keyid: str) -> Path:
    return keys.keys_dir() / KEY_ROLE / f"{keyid}.pem"


# --- versions published before the key existed -----------------------------------------------------------


def _without_provenance() -> QuerySet[Version]:
    return Version.objects.filter(provenance__isnull=True).select_related("extension").order_by("id")


def backfill(signer: CryptoSigner) -> int:
    """Sign a statement for every version that has none (published before the registry had a
    provenance key), from its build's record (through the reverse relation ``Version.builds``):
    what the registry did then, attested now, and marked so (``internalParameters.recorded``); its
    dependencies are resolved now. In the caller's transaction; how many were signed."""
    now = timezone.now()
    when = "when this statement was signed, not at publication"
    catalogue = DatabaseCatalogue()
    count = 0
    for version in _without_provenance().iterator(chunk_size=200):
        build = (
            version.builds.filter(status="succeeded")
            .select_related("submitted_by", "token")
            .order_by("-finished_at", "-created_at")
            .first()
        )
        requirements = version_requirements(version)
        if build is not None:
            facts = build_facts(build, dependencies=requirements, catalogue=catalogue)
            recorded = f"after publication, at {_iso(now)}, from the build's record"
            finished = build.finished_at or version.published_at
        else:
            resolved, how = resolve_dependencies(requirements, catalogue=catalogue)
            user = version.published_by.get_username() if version.published_by is not None else None
            facts = BuildFacts(
                build_id="",
                kind="package",
                upload_name=f"{version.extension.name}-{version.version}.tar.gz",
                upload_sha256=version.sha256,
                upload_size=int(version.size),
                started=version.published_at,
                publisher=Publisher(user=user, via="unknown"),
                dependencies=resolved,
                dependency_resolution=how,
            )
            recorded = f"after publication, at {_iso(now)}; the build's record was gone"
            finished = version.published_at
        facts = replace(
            facts, dependency_resolution={**facts.dependency_resolution, "when": when}, extra={"recorded": recorded}
        )
        store(version, envelope_for(version, facts, signer, finished=finished), keyid=signer.public_key.keyid)
        count += 1
    if count:
        log.info("provenance: signed statements for %s versions published before the key existed", count)
    return count


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
