"""A Build is one run of the publish pipeline: from an uploaded package or a source archive to an
immutable Version (or a failure with its reason). It points at the version it produced."""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

from django.conf import settings
from django.db import models


class Build(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    class Kind(models.TextChoices):
        PACKAGE = "package"  # POST /api/v1/extensions/: a built NAME-VERSION.tar.gz
        SOURCE = "source"  # POST /api/v1/builds/: a tar.gz of the source directory

    FINAL: ClassVar[tuple[str, ...]] = (Status.SUCCEEDED, Status.FAILED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    token = models.ForeignKey("registry.ApiToken", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The prefix of the token it was submitted with: if that token is gone when the build runs,
    # the build fails (it must never fall back to the user's full rights).
    token_prefix = models.CharField(max_length=16, blank=True)
    address = models.GenericIPAddressField(null=True, blank=True)
    filename = models.CharField(max_length=255, blank=True)
    upload_key = models.CharField(max_length=256, blank=True)  # staged upload, removed when the build ends
    upload_sha256 = models.CharField(max_length=64, blank=True)
    upload_size = models.BigIntegerField(default=0)
    name = models.CharField(max_length=64, blank=True)  # known once the package is inspected
    version_text = models.CharField(max_length=256, blank=True)
    version = models.ForeignKey(
        "registry.Version", null=True, blank=True, on_delete=models.SET_NULL, related_name="builds"
    )
    log = models.JSONField(default=list)  # [{"step", "status", "seconds", "message", "at"}]
    error_code = models.CharField(max_length=32, blank=True)
    error_message = models.TextField(blank=True)
    error_details = models.JSONField(default=list)
    attempts = models.PositiveIntegerField(default=0)  # the claim token: bumped by every claim
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)  # last time a task message was sent
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at",)
        indexes: ClassVar[list[Any]] = [models.Index(fields=("status", "heartbeat_at"))]

    def __str__(self) -> str:
        label = f"{self.name}@{self.version_text}" if self.name else self.filename
        return f"build {self.id} {label} {self.status}"

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL
