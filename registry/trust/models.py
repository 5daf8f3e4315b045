"""What the signed index is, as committed: every target (path, digest, length, which bin signs
it) and the current version of every metadata role. The metadata files in storage are rendered
from these rows, so the rows and the catalogue commit together and a crash that stored files but
did not commit leaves rows that say what the repository must be (`registry.trust.repository.repair`)."""

from __future__ import annotations

from django.db import models


class TrustRole(models.Model):
    """One metadata role: root, targets, snapshot, timestamp, or a hashed bin (``bin-3f``). The
    snapshot row is also the lock every writer of the signed index takes (an UPDATE), last."""

    name = models.CharField(primary_key=True, max_length=64)
    version = models.PositiveIntegerField()
    expires = models.DateTimeField()
    # The stored file's digest and length (what the snapshot or the timestamp lists).
    sha256 = models.CharField(max_length=64)
    length = models.PositiveBigIntegerField()
    # root and targets: the signed metadata itself (small; needed to sign their next version);
    # snapshot: the versions of the bins it lists, as JSON (the next snapshot starts from them).
    content = models.TextField(blank=True, default="")
    touched_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "trust_role"

    def __str__(self) -> str:
        return f"{self.version}.{self.name}.json"


class TrustTarget(models.Model):
    """One target of the signed index: an extension's index document, a package, ..."""

    path = models.CharField(primary_key=True, max_length=512)
    kind = models.CharField(max_length=32)
    extension = models.CharField(max_length=64, db_index=True)
    role = models.CharField(max_length=64, db_index=True)
    sha256 = models.CharField(max_length=64)
    length = models.PositiveBigIntegerField()

    class Meta:
        db_table = "trust_target"

    def __str__(self) -> str:
        return self.path
