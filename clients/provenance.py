"""The client's check of what the registry attests (SPEC 6.2): every package it uses comes with a
signed build provenance, verified before the package is used (by default, as the signed index is:
``--no-verify`` turns both off; `clients.registry_client.RegistryClient.verify_package` calls it).

A package's provenance is verified in three steps, all through the registry's signed index (so a
mirror, a proxy or the network cannot swap any of it):

1. the provenance key: the target ``keys/provenance.pub`` (PEM, Ed25519), fetched once per command;
2. the statement: the target ``provenance/NAME/NAME-VERSION.intoto.json`` (a DSSE envelope),
   downloaded by its digest, or taken from ``PROVISIONING_HOME/trust/{registry}/targets/``;
3. the envelope's signature against that key, and the statement's one subject against the package:
   ``NAME-VERSION.tar.gz`` with the sha256 the signed index lists for the package
   (`extensions.provenance.verify`).

A failure is a `clients.trust.VerificationError` naming what failed (``missing_target``: no
provenance, or no key; ``bad_signature``; ``subject_mismatch``; ``invalid_provenance``), and the
package is not used."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from securesystemslib.signer import Key, SSlibKey

from clients.trust import Trust, VerificationError
from extensions.provenance import Attested, ProvenanceError, verify

__all__ = ["PROVENANCE_KEY_TARGET", "ProvenanceVerifier", "VerifiedProvenance", "provenance_target"]

PROVENANCE_KEY_TARGET = "keys/provenance.pub"
MAX_KEY_BYTES = 16 * 1024


def provenance_target(name: str, version: str) -> str:
    return f"provenance/{name}/{name}-{version}.intoto.json"


class ProvenanceVerifier:
    """Verifies packages' provenance against one registry's signed index (one per command)."""

    def __init__(self, trust: Trust) -> None:
        self.trust = trust
        self._key: Key | None = None

    def key(self) -> Key:
        """The registry's provenance key, as its signed index publishes it."""
        if self._key is not None:
            return self._key
        url = self.trust.base_url
        data = self.trust.target_bytes(PROVENANCE_KEY_TARGET, what="the registry's provenance key")
        if data is None:
            raise VerificationError(
                "missing_target",
                f"missing target: the signed metadata of {url} publishes no provenance key ({PROVENANCE_KEY_TARGET}), "
                "so no package's provenance can be verified and nothing is used; its operator runs "
                "`manage.py trust init --if-missing`",
            )
        try:
            public = load_pem_public_key(data[:MAX_KEY_BYTES])
            if not isinstance(public, Ed25519PublicKey):
                raise ValueError(f"it is a {type(public).__name__}, not an Ed25519 key")
            self._key = SSlibKey.from_crypto(public)
        except (ValueError, TypeError) as exc:
            raise VerificationError(
                "invalid_provenance",
                f"the provenance key {url} publishes ({PROVENANCE_KEY_TARGET}) is not an Ed25519 public key "
                f"in PEM: {exc}; nothing is used",
            ) from None
        return self._key

    def check(self, name: str, version: str, sha256: str) -> VerifiedProvenance:
        """NAME VERSION's provenance, verified: signed by the registry's provenance key, attesting
        the package with ``sha256``. VerificationError otherwise."""
        url = self.trust.base_url
        path = provenance_target(name, version)
        data = self.trust.target_bytes(path, what=f"the provenance of {name} {version}")
        if data is None:
            raise VerificationError(
                "missing_target",
                f"missing target: {name} {version} has no provenance in the signed metadata of {url} (no target "
                f"{path}); what built it cannot be verified, so it is not used",
            )
        key = self.key()
        try:
            attested = verify(data, [key], name=name, version=version, sha256=sha256)
        except ProvenanceError as exc:
            raise VerificationError(exc.reason, f"{exc.message} (from {url}); it is not used") from None
        return VerifiedProvenance(name=name, version=version, sha256=sha256, attested=attested, registry=url)


@dataclass(frozen=True)
class VerifiedProvenance:
    name: str
    version: str
    sha256: str
    attested: Attested
    registry: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "sha256": self.sha256,
            "registry": self.registry,
            "verified": True,
            "summary": self.attested.summary(),
            "statement": self.attested.statement,
        }
