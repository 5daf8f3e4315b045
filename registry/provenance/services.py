"""Writes of the build provenance: a version's statement at its commit, the provenance key's
creation for a registry whose signed index predates it, and its rotation.

**At the commit.** `provenance_record` runs inside the publishing transaction
(`registry.services.version_create`), after the version's rows and before the signed index
re-signs the extension: it takes the signed index's lock (so a rotation cannot interleave: the
statement is signed with the key that is current when the lock is held), signs the statement with
the current key and stores it. The signed index then lists it as a target with the version's
package and index document, in the same re-signing. A commit that fails leaves no statement (the
row rolls back; the stored target file, never listed, is swept).

**Rotation** (`trust rotate provenance`, no root key needed: the public key is a target, signed by
the targets key) makes a new key current, signs every statement again with it (the same payload,
so the same statement, with a new signature), publishes the new public key and re-signs the bins
once. Clients verify against the key the signed index lists, so the old key signs nothing valid
from then on; its file is deleted after the commit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from extensions.provenance import resign
from registry.models import Extension, Version
from registry.provenance import records
from registry.provenance.models import Provenance
from registry.selectors import catalog_changed
from registry.trust import repository

log = logging.getLogger(__name__)

_warned: list[bool] = []


def provenance_record(*, version: Version, facts: records.BuildFacts) -> Provenance | None:
    """Sign and store ``version``'s statement (in the publishing transaction). None when the
    registry has no provenance key yet (its signed index is not initialized): `trust init` signs
    statements for the versions published until then."""
    repository.take_lock()
    key = records.current_key()
    if key is None:
        if not _warned:
            _warned.append(True)
            log.warning("provenance: no provenance key (run `manage.py trust init`); versions are published unsigned")
        return None
    signer = records.signer_of(key)
    envelope = records.envelope_for(version, facts, signer, finished=timezone.now())
    return records.store(version, envelope, keyid=key.keyid, new=True)


@dataclass(frozen=True)
class KeyChange:
    keyid: str
    key_file: Path
    signed: int  # statements signed (new) or signed again (rotation)
    removed: Path | None = None
    resigned: tuple[str, ...] = ()


def _record_all() -> list[str]:
    """Sign every extension's statements into the signed index. Their pages show the new
    signatures: the rows are touched, so the pages' ETags change (`selectors.extension_fingerprint`),
    and the catalog's state with them."""
    extensions = list(Extension.objects.filter(versions__provenance__isnull=False).distinct().order_by("name"))
    Extension.objects.filter(pk__in=[e.pk for e in extensions]).update(updated_at=timezone.now())
    transaction.on_commit(catalog_changed)
    return repository.record_extensions(extensions, registry=True)


def key_ensure() -> KeyChange | None:
    """Create the provenance key of a registry whose signed index was initialized before provenance
    existed (``trust init --if-missing``), signing a statement for every version; None when it has
    one."""
    with transaction.atomic():
        repository.take_lock()
        if not repository.initialized():
            raise repository.TrustError("the signed index is not initialized: run `python manage.py trust init`")
        if records.current_key() is not None:
            return None
        key, signer = records.create_key()
        signed = records.backfill(signer)
        resigned = _record_all()
    return KeyChange(key.keyid, records.key_path(key.keyid), signed, resigned=tuple(resigned))


def key_rotate() -> KeyChange:
    """Replace the provenance key: every statement signed again with a new one (``trust rotate provenance``)."""
    with transaction.atomic():
        repository.take_lock()
        if not repository.initialized():
            raise repository.TrustError("the signed index is not initialized: run `python manage.py trust init`")
        old = records.current_key()
        key, signer = records.create_key()
        signed = 0
        for row in Provenance.objects.select_related("version__extension").order_by("pk").iterator(chunk_size=200):
            records.store(row.version, resign(row.data, signer), keyid=key.keyid)
            signed += 1
        signed += records.backfill(signer)
        resigned = _record_all()
    removed = None
    if old is not None:  # after the commit: a failed rotation keeps the key that still signs
        path = records.key_path(old.keyid)
        if path.exists():
            path.unlink()
            removed = path
    return KeyChange(key.keyid, records.key_path(key.keyid), signed, removed=removed, resigned=tuple(resigned))
