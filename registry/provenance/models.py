"""What the registry attests, as committed: one signed provenance statement per version, and the
provenance keys (the current one signs; a rotated one is kept, retired, for the record)."""

from __future__ import annotations

from django.db import models

from registry.models import Version


class ProvenanceKey(models.Model):
    """An Ed25519 key that signs provenance statements. Its private half is a file under
        ``REGISTRY_TUF_KEYS_DIR/provenance/<keyid>.pem``; its public half is published through the
        signed index (the target ``keys/provenance.pub``). One is current (``retired_at`` null): it is
    created and retired only under the signed index's lock (`registry.provenance.services`)."""

    keyid = models.CharField(primary_key=True, max_length=64)
    public_pem = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    retired_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        db_table = "provenance_key"

    def __str__(self) -> str:
        return f"provenance key {self.keyid[:16]}" + (" (retired)" if self.retired_at else "")


class Provenance(models.Model):
    """A version's signed provenance: the DSSE envelope exactly as served (canonical JSON), its
    digest and length (what the signed index lists, the ETag), the key that signed it, and the
    digests of its OCI referrer manifests (one per manifest of the version: plain and yanked)."""

    version = models.OneToOneField(Version, primary_key=True, on_delete=models.CASCADE, related_name="provenance")
    envelope = models.TextField()
    sha256 = models.CharField(max_length=64, db_index=True)
    length = models.PositiveIntegerField()
    keyid = models.CharField(max_length=64)
    subject_sha256 = models.CharField(max_length=64)
    oci_referrer_sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    oci_yanked_referrer_sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    created_at = models.DateTimeField()  # when the statement was made (its OCI referrer's "created")
    signed_at = models.DateTimeField()  # when it was last signed (a key rotation signs it again)

    class Meta:
        db_table = "provenance"

    def __str__(self) -> str:
        return f"provenance of version {self.version_id}"

    @property
    def data(self) -> bytes:
        return self.envelope.encode("utf-8")
