"""Plain Django views outside the JSON API: liveness."""

from __future__ import annotations

import logging

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from registry import exceptions

log = logging.getLogger(__name__)


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the database answers and package storage is reachable."""
    from django.core.files.storage import storages

    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception:
        log.exception("health check: database")
        checks["database"] = "unavailable"
    try:
        storages["packages"].exists("healthz-probe")
        checks["storage"] = "ok"
    except Exception:
        log.exception("health check: storage")
        checks["storage"] = "unavailable"
    healthy = all(value == "ok" for value in checks.values())
    return JsonResponse(
        {"success": healthy, "data": {"status": "ok" if healthy else "unhealthy", "checks": checks}},
        status=200 if healthy else 503,
    )


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def handler400(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return exceptions.json_400(request, exception)
    return defaults.bad_request(request, exception or Exception())


def handler403(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return exceptions.json_403(request, exception)
    return defaults.permission_denied(request, exception or Exception())


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return exceptions.json_404(request, exception)
    return defaults.page_not_found(request, exception or Exception())


def handler500(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return exceptions.json_500(request)
    return defaults.server_error(request)
