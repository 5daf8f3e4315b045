"""Does every version have a valid signed provenance? (`manage.py trust check`, and issue 15's
`check_integrity`.)

Checked, for every version: it has a statement; the statement's envelope verifies with the current
provenance key (the one the signed index publishes) and attests the version's package (its file name
and sha256); the stored digest and length are the envelope's; and the signed index lists it as the
target ``provenance/NAME/NAME-VERSION.intoto.json`` with that digest and length."""

from __future__ import annotations

import hashlib

from cryptography.hazmat.primitives.serialization import load_pem_public_key
from securesystemslib.signer import SSlibKey

from extensions.provenance import ProvenanceError, verify
from registry.models import Version
from registry.provenance.models import Provenance, ProvenanceKey
from registry.trust.models import TrustTarget
from registry.trust.targets import PROVENANCE_KEY_PATH, provenance_path


def check_provenance() -> list[str]:
    """Every problem, one line each; [] when every version has a valid signed provenance target."""
    key_row = ProvenanceKey.objects.filter(retired_at__isnull=True).first()
    if key_row is None:
        return ["the registry has no provenance key: run `python manage.py trust init --if-missing`"]
    key = SSlibKey.from_crypto(load_pem_public_key(key_row.public_pem.encode("ascii")))
    problems: list[str] = []
    published = hashlib.sha256(key_row.public_pem.encode("ascii")).hexdigest()
    if not TrustTarget.objects.filter(path=PROVENANCE_KEY_PATH, sha256=published).exists():
        problems.append(f"the provenance key {key.keyid[:16]} is not the signed target {PROVENANCE_KEY_PATH}")
    signed = {
        path: (sha256, length)
        for path, sha256, length in TrustTarget.objects.filter(kind="provenance").values_list(
            "path", "sha256", "length"
        )
    }
    versions = (
        Version.objects.select_related("extension", "provenance")
        .only(
            "extension__name", "version", "sha256", "provenance__envelope", "provenance__sha256", "provenance__length"
        )
        .order_by("id")
    )
    for version in versions.iterator(chunk_size=500):
        name, number = version.extension.name, version.version
        try:
            row = version.provenance
        except Provenance.DoesNotExist:
            row = None
        if row is None:
            problems.append(f"{name} {number} has no provenance")
            continue
        data = row.data
        if hashlib.sha256(data).hexdigest() != row.sha256 or len(data) != row.length:
            problems.append(f"{name} {number}: the stored provenance is not the digest or length recorded for it")
        try:
            verify(data, [key], name=name, version=number, sha256=version.sha256)
        except ProvenanceError as exc:
            problems.append(f"{name} {number}: {exc.message}")
        path = provenance_path(name, number)
        if signed.get(path) != (row.sha256, row.length):
            problems.append(f"{name} {number}: its provenance is not the signed target {path}")
    return problems
