"""How a build is shown: status, step-by-step log with timings, error, resulting version."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from rest_framework import serializers

from builds.models import Build


def build_data(build: Build, *, base_url: str = "") -> dict[str, Any]:
    version = None
    if build.version_id is not None and build.name:
        version = {
            "name": build.name,
            "version": build.version_text,
            "url": base_url + reverse("version-detail", kwargs={"name": build.name, "version": build.version_text}),
        }
    error = None
    if build.status == Build.Status.FAILED:
        error = {"code": build.error_code, "message": build.error_message, "details": build.error_details}
    return {
        "id": str(build.pk),
        "kind": build.kind,
        "status": build.status,
        "name": build.name or None,
        "version": build.version_text or None,
        "filename": build.filename,
        "upload": {"size": build.upload_size, "sha256": build.upload_sha256},
        "submitted_by": build.submitted_by.get_username() if build.submitted_by else None,
        "created_at": build.created_at.isoformat() if build.created_at else None,
        "started_at": build.started_at.isoformat() if build.started_at else None,
        "finished_at": build.finished_at.isoformat() if build.finished_at else None,
        "attempts": build.attempts,
        "log": build.log,
        "error": error,
        "result": version,
        "url": base_url + reverse("build-detail", kwargs={"build_id": str(build.pk)}),
    }


# --- the shape, defined once: it renders the API's answers and documents them ---------------------


class _Upload(serializers.Serializer):
    size = serializers.IntegerField(allow_null=True)
    sha256 = serializers.CharField(allow_null=True, allow_blank=True)


class _LogEntry(serializers.Serializer):
    step = serializers.CharField()
    status = serializers.CharField(help_text="ok, failed, skipped, ...")
    seconds = serializers.FloatField()
    message = serializers.CharField(allow_blank=True)
    at = serializers.DateTimeField()


class _BuildError(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.JSONField()


class _BuildResult(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.CharField()
    url = serializers.URLField()


class BuildDocument(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.ChoiceField(choices=Build.Kind.choices)
    status = serializers.ChoiceField(choices=Build.Status.choices)
    name = serializers.CharField(allow_null=True)
    version = serializers.CharField(allow_null=True)
    filename = serializers.CharField(allow_blank=True)
    upload = _Upload()
    submitted_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    attempts = serializers.IntegerField()
    log = _LogEntry(many=True, help_text="the steps, each timed")
    error = _BuildError(allow_null=True, help_text="when failed: the error, as an API error would be")
    result = _BuildResult(allow_null=True, help_text="when succeeded: the version it published")
    url = serializers.URLField()


def build_document(build: Build, *, base_url: str = "") -> dict[str, Any]:
    """``build_data`` as the API sends it (written by BuildDocument)."""
    return BuildDocument().to_representation(build_data(build, base_url=base_url))
