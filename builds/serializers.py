"""How a build is shown: status, step-by-step log with timings, error, resulting version."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

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
