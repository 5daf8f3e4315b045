"""The web catalog's build page: a build's status, its step-by-step log with timings, its error,
and the version it produced. (The JSON view of the same build is `builds.apis.BuildDetailApi`.)

Everything shown comes from the author's package (file names in check messages, error text) and
is escaped by the template. A build that is still queued or running is never cached; the page
follows it live: `registry/static/registry/build-live.js` fetches the changing part of the page
(`build_live`, the same template) every few seconds and swaps it in until the build ends; without
scripts, the page refreshes itself (a meta refresh inside ``<noscript>``) and has a reload link."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import condition, require_safe

from builds.models import Build
from registry.errors import NotFound
from registry.views import catalog_etag, catalog_page, version_url

REFRESH_SECONDS = 3


def _parse_id(build_id: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(build_id)
    except ValueError:
        return None


def _final_state(request: HttpRequest, build_id: str) -> tuple[str, datetime | None, int | None] | None:
    """(status, finished_at, version id) of a build that has finished; None otherwise (a running
    build's log changes without a timestamp that says so, so it gets no validator). Read once per
    request: both validators of `condition` ask for it."""
    memo = vars(request)
    if "_final_build_state" not in memo:
        pk = _parse_id(build_id)
        query = Build.objects.filter(pk=pk, status__in=Build.FINAL) if pk is not None else Build.objects.none()
        memo["_final_build_state"] = query.values_list("status", "finished_at", "version_id").first()
    state: tuple[str, datetime | None, int | None] | None = memo["_final_build_state"]
    return state


def _build_etag(request: HttpRequest, build_id: str) -> str | None:
    state = _final_state(request, build_id)
    return catalog_etag(request, build_id, *state) if state is not None else None


def _build_last_modified(request: HttpRequest, build_id: str) -> datetime | None:
    state = _final_state(request, build_id)
    return state[1] if state is not None else None


def _detail_text(detail: Any) -> str:
    """One line for an error detail (``{"path", "message"}`` and other shapes)."""
    if isinstance(detail, dict):
        path, message = detail.get("path"), detail.get("message")
        if path and message:
            return f"{path}: {message}"
        return ", ".join(f"{key}: {value}" for key, value in detail.items())
    return str(detail)


def _log_entries(log: Any) -> list[dict[str, Any]]:
    entries = []
    for entry in log if isinstance(log, list) else []:
        if not isinstance(entry, dict):
            continue
        seconds = entry.get("seconds")
        entries.append(
            {
                "step": str(entry.get("step", "")),
                "status": str(entry.get("status", "")),
                "seconds": seconds if isinstance(seconds, int | float) else None,
                "message": str(entry.get("message", "")),
                "at": str(entry.get("at", "")),
            }
        )
    return entries


def _build_context(request: HttpRequest, build_id: str) -> dict[str, Any]:
    pk = _parse_id(build_id)
    if pk is None:
        raise NotFound(f"There is no build {build_id[:80]!r}: build ids are UUIDs.")
    build = Build.objects.select_related("submitted_by", "version", "version__extension").filter(pk=pk).first()
    if build is None:
        raise NotFound(f"There is no build {pk} in this registry.")
    log = _log_entries(build.log)
    result = None
    if build.version is not None:
        result = {
            "name": build.version.extension.name,
            "version": build.version.version,
            "url": version_url(build.version.extension.name, build.version.canonical),
        }
    error = None
    if build.status == Build.Status.FAILED:
        details = build.error_details if isinstance(build.error_details, list) else []
        error = {
            "code": build.error_code,
            "message": build.error_message,
            "details": [_detail_text(d) for d in details if not (isinstance(d, dict) and set(d) <= {"build", "url"})],
        }
    duration = None
    if build.started_at is not None and build.finished_at is not None:
        duration = (build.finished_at - build.started_at).total_seconds()
    return {
        "build": build,
        "log": log,
        "result": result,
        "error": error,
        "duration": duration,
        "refresh": None if build.is_final else REFRESH_SECONDS,
        "api_url": reverse("build-detail", kwargs={"build_id": str(build.pk)}),
        "live_url": reverse("catalog-build-live", kwargs={"build_id": str(build.pk)}),
        "title": f"Build {str(build.pk)[:8]}",
    }


@catalog_page
@require_safe
@condition(etag_func=_build_etag, last_modified_func=_build_last_modified)
def build_page(request: HttpRequest, build_id: str) -> HttpResponse:
    context = _build_context(request, build_id)
    response = render(request, "builds/build.html", context)
    if not context["build"].is_final:
        response["Cache-Control"] = "no-store"
    return response


@catalog_page
@require_safe
@condition(etag_func=_build_etag, last_modified_func=_build_last_modified)
def build_live(request: HttpRequest, build_id: str) -> HttpResponse:
    """The changing part of the build page alone (an HTML fragment, escaped like the page), for
    the page's script to follow a build that is still queued or running."""
    context = _build_context(request, build_id)
    response = render(request, "builds/_build_live.html", context)
    if not context["build"].is_final:
        response["Cache-Control"] = "no-store"
    return response
