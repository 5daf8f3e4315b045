"""Build provenance (SPEC 6.2): what the registry attests about each package it publishes, and how
that attestation is checked. Pure Python, shared: the registry renders and signs a statement for
every build (`registry.provenance`), the client verifies it before it uses a package
(`clients.provenance`), with the same definitions.

The attestation is an in-toto Statement v1 whose predicate is SLSA Provenance v1, serialised as
canonical JSON and wrapped in a DSSE envelope (securesystemslib's `dsse.Envelope`) signed with the
registry's Ed25519 provenance key::

    {"payloadType": "application/vnd.in-toto+json", "payload": base64(statement), "signatures": [{"keyid", "sig"}]}

    statement  _type          https://in-toto.io/Statement/v1
               subject        [{"name": "NAME-VERSION.tar.gz", "digest": {"sha256": package}}]
               predicateType  https://slsa.dev/provenance/v1
               predicate      buildDefinition  buildType            BUILD_TYPE
                                               externalParameters   what the publisher gave: name, version,
                                                                    kind (source | package), the upload
                                                                    (file name, sha256, size)
                                               internalParameters   what the registry decided: its builder
                                                                    and version, the publisher (user, token
                                                                    prefix, trusted publisher and its
                                                                    verified claims), how dependencies
                                                                    were resolved
                                               resolvedDependencies the upload, then what the version's
                                                                    dependencies resolved to when it was
                                                                    published (name, version, sha256, URL)
                              runDetails       builder              {"id": the registry's builder URL,
                                                                     "version": {...}}
                                               metadata             invocationId (the build id),
                                                                    startedOn, finishedOn
                                               byproducts           the reproducibility verdict (and its
                                                                    note), the build log's URL

What it attests is what the registry itself did: which bytes it built or inspected, what it
produced, for whom, when. It says nothing of the author's intent; see docs/trust.md.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from securesystemslib import exceptions as sslib_errors
from securesystemslib.dsse import Envelope
from securesystemslib.signer import Key, Signer

from extensions.errors import ExtensionError

__all__ = [
    "BUILD_TYPE",
    "ENVELOPE_MEDIA_TYPE",
    "MEDIA_TYPE",
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "STATEMENT_TYPE",
    "Attested",
    "BuildRecord",
    "ProvenanceError",
    "Publisher",
    "ResolvedDependency",
    "decode_payload",
    "envelope_bytes",
    "package_filename",
    "resign",
    "sign",
    "statement",
    "summary",
    "verify",
]

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
#: The DSSE payload type of an in-toto statement, and the media type the registry serves it with.
PAYLOAD_TYPE = "application/vnd.in-toto+json"
MEDIA_TYPE = "application/vnd.in-toto+json"
#: The media type of the envelope as an OCI blob (the layer of the provenance referrer).
ENVELOPE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"
#: What kind of build this is: the registry's pipeline (SPEC 3.3), from a source archive or a package.
BUILD_TYPE = "urn:provisioning:registry:build:v1"
BUILDER_NAME = "provisioning-registry"
#: An envelope larger than this is not one the registry writes (the client refuses it unread).
MAX_ENVELOPE_BYTES = 1024 * 1024


class ProvenanceError(ExtensionError):
    """A provenance statement that does not verify. ``reason``: ``invalid_provenance`` (not an
    envelope or statement of the expected shape), ``bad_signature`` (not signed by the key given),
    ``subject_mismatch`` (it attests other bytes or another package)."""

    code = "verification_failed"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, details=[{"reason": reason}])
        self.reason = reason


def package_filename(name: str, version: str) -> str:
    return f"{name}-{version}.tar.gz"


def _time(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("provenance times must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# --- what a statement attests ------------------------------------------------------------------------


@dataclass(frozen=True)
class ResolvedDependency:
    """What one of the version's dependencies resolved to when it was published. ``constraint`` is
    the dependency's constraint as written, for the version's own (direct) dependencies; None for a
    dependency of a dependency."""

    name: str
    version: str
    sha256: str
    uri: str
    constraint: str | None = None

    def descriptor(self) -> dict[str, Any]:
        annotations: dict[str, Any] = {"version": self.version, "direct": self.constraint is not None}
        if self.constraint is not None:
            annotations["constraint"] = self.constraint
        return {"name": self.name, "uri": self.uri, "digest": {"sha256": self.sha256}, "annotations": annotations}


@dataclass(frozen=True)
class Publisher:
    """Who published: the user and the prefix of the token (``via`` ``token``), the user without a
    token (``no-token``: a web session, or the operator's ``manage.py publish``), or a token
    answered by trusted publishing (``trusted-publishing``), whose publisher (issuer, audience) and
    verified claims are kept. (``unknown`` for a version whose build record was gone when its
    statement was made.)"""

    user: str | None
    via: str = "token"
    token_prefix: str | None = None
    trusted_publisher: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"user": self.user, "via": self.via}
        if self.token_prefix:
            found["token"] = self.token_prefix
        if self.trusted_publisher is not None:
            found["trustedPublisher"] = dict(self.trusted_publisher)
        return found


@dataclass(frozen=True)
class BuildRecord:
    """The facts one statement attests (all known when the build commits)."""

    name: str
    version: str
    sha256: str  # of the package: the subject
    kind: str  # "source" (built from a source archive) or "package" (an uploaded package)
    upload_name: str
    upload_sha256: str
    upload_size: int
    builder_id: str
    builder_version: Mapping[str, str]
    build_id: str
    started: datetime
    finished: datetime
    publisher: Publisher
    dependencies: Sequence[ResolvedDependency] = ()
    dependency_resolution: Mapping[str, Any] = field(default_factory=dict)
    reproducible: bool | None = None
    reproducible_note: str = ""
    build_log_uri: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # further internalParameters

    @property
    def filename(self) -> str:
        return package_filename(self.name, self.version)


def statement(record: BuildRecord) -> dict[str, Any]:
    """The in-toto Statement v1 (SLSA Provenance v1 predicate) of ``record``."""
    upload = {"name": record.upload_name, "digest": {"sha256": record.upload_sha256}, "size": record.upload_size}
    byproducts: list[dict[str, Any]] = [
        {
            "name": "reproducibility",
            "annotations": {"reproducible": record.reproducible, "note": record.reproducible_note},
        }
    ]
    if record.build_log_uri:
        byproducts.append({"name": "build-log", "uri": record.build_log_uri, "mediaType": "application/json"})
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": record.filename, "digest": {"sha256": record.sha256}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "name": record.name,
                    "version": record.version,
                    "kind": record.kind,
                    "upload": upload,
                },
                "internalParameters": {
                    "builder": {"name": BUILDER_NAME, **dict(record.builder_version)},
                    "publisher": record.publisher.to_dict(),
                    "dependencyResolution": dict(record.dependency_resolution),
                    **dict(record.extra),
                },
                "resolvedDependencies": [
                    {
                        "name": record.upload_name,
                        "digest": {"sha256": record.upload_sha256},
                        "annotations": {"role": "source archive" if record.kind == "source" else "uploaded package"},
                    },
                    *(dependency.descriptor() for dependency in record.dependencies),
                ],
            },
            "runDetails": {
                "builder": {"id": record.builder_id, "version": dict(record.builder_version)},
                "metadata": {
                    "invocationId": record.build_id,
                    "startedOn": _time(record.started),
                    "finishedOn": _time(record.finished),
                },
                "byproducts": byproducts,
            },
        },
    }


# --- signing --------------------------------------------------------------------------------------------


def envelope_bytes(envelope: Envelope) -> bytes:
    """The envelope as the registry stores and serves it: canonical JSON."""
    return _canonical(envelope.to_dict())


def sign(value: Mapping[str, Any], signer: Signer) -> bytes:
    """The DSSE envelope of the statement ``value`` (canonical JSON), signed by ``signer``."""
    envelope = Envelope(payload=_canonical(value), payload_type=PAYLOAD_TYPE, signatures={})
    envelope.sign(signer)
    return envelope_bytes(envelope)


def resign(data: bytes, signer: Signer) -> bytes:
    """The same statement (the payload's bytes unchanged) signed by ``signer`` alone: a key rotation."""
    envelope = _read_envelope(data)
    envelope.signatures.clear()
    envelope.sign(signer)
    return envelope_bytes(envelope)


# --- verifying ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attested:
    """A statement whose signature and subject verified."""

    statement: dict[str, Any]
    keyid: str

    def summary(self) -> dict[str, Any]:
        return {**summary(self.statement), "keyid": self.keyid}


def _invalid(message: str) -> ProvenanceError:
    return ProvenanceError("invalid_provenance", message)


def _read_envelope(data: bytes) -> Envelope:
    if len(data) > MAX_ENVELOPE_BYTES:
        raise _invalid(f"it is {len(data)} bytes; a provenance envelope is at most {MAX_ENVELOPE_BYTES}")
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _invalid("it is not JSON; a DSSE envelope is a JSON object") from None
    if not isinstance(document, dict) or not isinstance(document.get("signatures"), list):
        raise _invalid('it is not a DSSE envelope: {"payload", "payloadType", "signatures": [...]} is expected')
    if document.get("payloadType") != PAYLOAD_TYPE:
        raise _invalid(f"its payloadType is {str(document.get('payloadType'))[:80]!r}, not {PAYLOAD_TYPE!r}")
    try:
        return Envelope.from_dict(document)
    except (KeyError, TypeError, ValueError, AttributeError, binascii.Error, sslib_errors.FormatError) as exc:
        raise _invalid(f"it is not a valid DSSE envelope ({type(exc).__name__}: {str(exc)[:120]})") from None


def verify(data: bytes, keys: Iterable[Key], *, name: str, version: str, sha256: str) -> Attested:
    """Check a provenance envelope: signed (DSSE) by one of ``keys``; an in-toto v1 statement with a
    SLSA v1 predicate whose one subject is ``NAME-VERSION.tar.gz`` with ``sha256``. Returns the
    statement; `ProvenanceError` saying what failed otherwise."""
    what = f"the provenance of {name} {version}"
    envelope = _read_envelope(data)
    candidates = list(keys)
    try:
        accepted = envelope.verify(candidates, 1) if candidates else {}
    except (sslib_errors.VerificationError, ValueError):
        accepted = {}
    if not accepted:
        signers = ", ".join(sorted(k[:16] for k in envelope.signatures)) or "none"
        expected = ", ".join(sorted(k.keyid[:16] for k in candidates)) or "none"
        raise ProvenanceError(
            "bad_signature",
            f"bad signature: {what} is not validly signed by the registry's provenance key "
            f"({expected}; the envelope's signatures name {signers}): it was changed or made with another key",
        )
    try:
        value = json.loads(envelope.payload)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _invalid(f"{what}: its signed payload is not JSON") from None
    if not isinstance(value, dict) or value.get("_type") != STATEMENT_TYPE:
        raise _invalid(f"{what}: its payload is not an in-toto Statement v1 ({STATEMENT_TYPE})")
    if value.get("predicateType") != PREDICATE_TYPE or not isinstance(value.get("predicate"), dict):
        raise _invalid(f"{what}: its predicate is not SLSA Provenance v1 ({PREDICATE_TYPE})")
    subjects = value.get("subject")
    expected_name = package_filename(name, version)
    if not isinstance(subjects, list) or len(subjects) != 1 or not isinstance(subjects[0], dict):
        raise ProvenanceError("subject_mismatch", f"wrong subject: {what} does not attest exactly one package")
    subject = subjects[0]
    digest = _dict(subject.get("digest"))
    attested_name, attested_sha = subject.get("name"), digest.get("sha256")
    if attested_name != expected_name or attested_sha != sha256:
        raise ProvenanceError(
            "subject_mismatch",
            f"wrong subject: {what} attests {str(attested_name)[:120]} with sha256 {str(attested_sha)[:64]}, "
            f"but the package is {expected_name} with sha256 {sha256}: it is not this package's provenance",
        )
    return Attested(statement=value, keyid=next(iter(accepted)))


def decode_payload(data: bytes) -> dict[str, Any]:
    """The statement inside an envelope, unverified (for showing what a refused one claims)."""
    envelope = _read_envelope(data)
    try:
        value = json.loads(envelope.payload)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _invalid("its payload is not JSON") from None
    if not isinstance(value, dict):
        raise _invalid("its payload is not a JSON object")
    return value


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _get(value: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def summary(value: Mapping[str, Any]) -> dict[str, Any]:
    """What a person wants from a statement (``provisioning extension verify``): the package, who
    published it and how, from what upload, when, the builder, the reproducibility verdict, the
    resolved dependencies."""
    predicate = value.get("predicate")
    subjects = _list(value.get("subject"))
    subject = _dict(subjects[0] if subjects else None)
    build = _dict(_get(predicate, "buildDefinition"))
    run = _dict(_get(predicate, "runDetails"))
    byproducts = _list(run.get("byproducts"))
    reproducibility = next(
        (_dict(b.get("annotations")) for b in byproducts if isinstance(b, dict) and b.get("name") == "reproducibility"),
        {},
    )
    log = next((b.get("uri") for b in byproducts if isinstance(b, dict) and b.get("name") == "build-log"), None)
    dependencies = [
        {
            "name": d.get("name"),
            "version": _get(d, "annotations", "version"),
            "constraint": _get(d, "annotations", "constraint"),
            "direct": bool(_get(d, "annotations", "direct")),
            "sha256": _get(d, "digest", "sha256"),
        }
        for d in _list(build.get("resolvedDependencies"))
        if isinstance(d, dict) and _get(d, "annotations", "role") is None
    ]
    return {
        "package": subject.get("name"),
        "sha256": _get(subject, "digest", "sha256"),
        "name": _get(build, "externalParameters", "name"),
        "version": _get(build, "externalParameters", "version"),
        "kind": _get(build, "externalParameters", "kind"),
        "upload": _get(build, "externalParameters", "upload"),
        "publisher": _get(build, "internalParameters", "publisher"),
        "builder": _get(run, "builder", "id"),
        "builder_version": _get(run, "builder", "version"),
        "build": _get(run, "metadata", "invocationId"),
        "started": _get(run, "metadata", "startedOn"),
        "finished": _get(run, "metadata", "finishedOn"),
        "reproducible": reproducibility.get("reproducible"),
        "reproducible_note": reproducibility.get("note"),
        "build_log": log,
        "dependencies": dependencies,
        "dependency_resolution": _get(build, "internalParameters", "dependencyResolution"),
    }
