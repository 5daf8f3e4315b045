"""Plain Django views outside the JSON API: liveness."""

from __future__ import annotations

import logging

from django.db import connection
from django.http import HttpRequest, JsonResponse

log = logging.getLogger(__name__)


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the database answers and package storage is reachable."""
    from django.core.files.storage import storages

    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception:  # noqa: BLE001 - any failure means "not healthy", reported, not raised
        log.exception("health check: database")
        checks["database"] = "unavailable"
    try:
        storages["packages"].exists("healthz-probe")
        checks["storage"] = "ok"
    except Exception:  # noqa: BLE001
        log.exception("health check: storage")
        checks["storage"] = "unavailable"
    healthy = all(value == "ok" for value in checks.values())
    return JsonResponse({"success": healthy, "data": {"status": "ok" if healthy else "unhealthy", "checks": checks}},
                        status=200 if healthy else 503)
