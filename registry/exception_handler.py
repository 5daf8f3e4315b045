"""Errors are converted once, here: every error under /api/v1/ leaves as the SPEC envelope
``{"success": false, "error": {"code", "message", "details"}}`` with the status of its code."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import (
    DisallowedHost,
    PermissionDenied,
    RequestDataTooBig,
    SuspiciousOperation,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions as drf
from rest_framework.response import Response

from extensions.errors import ExtensionError
from registry.errors import (
    STATUS_BY_CODE,
    UNAVAILABLE_RETRY_AFTER,
    DatabaseUnavailable,
    RateLimited,
    RegistryError,
    classify_error,
    is_database_outage,
    is_database_timeout,
)

log = logging.getLogger(__name__)


def error_body(code: str, message: str, details: list[Any] | None = None) -> dict[str, Any]:
    return {"success": False, "error": {"code": code, "message": message, "details": details or []}}


def malformed_message(exc: Exception | None) -> str:
    """What a request Django refused as suspicious did wrong, and what is allowed (never Django's
    own text, which names its settings)."""
    if isinstance(exc, TooManyFieldsSent | TooManyFilesSent):
        many, what = (
            (settings.DATA_UPLOAD_MAX_NUMBER_FIELDS, "form fields")
            if isinstance(exc, TooManyFieldsSent)
            else (settings.DATA_UPLOAD_MAX_NUMBER_FILES, "files")
        )
        return f"malformed request: too many {what}; allowed: at most {many}"
    if isinstance(exc, DisallowedHost):
        return "malformed request: the Host header names no host this registry serves"
    return "malformed request"


def _flatten(detail: Any, path: str = "") -> list[dict[str, str]]:
    """DRF validation errors as ``[{"path", "message"}]``."""
    if isinstance(detail, dict):
        items: list[dict[str, str]] = []
        for key, value in detail.items():
            sub = key if key != "non_field_errors" else ""
            items.extend(_flatten(value, f"{path}.{sub}" if path and sub else (sub or path)))
        return items
    if isinstance(detail, list):
        if all(not isinstance(x, dict | list) for x in detail):
            return [{"path": path, "message": str(x)} for x in detail]
        items = []
        for index, value in enumerate(detail):
            items.extend(_flatten(value, f"{path}[{index}]"))
        return items
    return [{"path": path, "message": str(detail)}]


_DRF_CODES: list[tuple[type[Exception], str]] = [
    (drf.NotAuthenticated, "unauthenticated"),
    (drf.AuthenticationFailed, "unauthenticated"),
    (drf.PermissionDenied, "forbidden"),
    (drf.NotFound, "not_found"),
    (drf.MethodNotAllowed, "method_not_allowed"),
    (drf.NotAcceptable, "not_acceptable"),
    (drf.UnsupportedMediaType, "unsupported_media_type"),
    (drf.ParseError, "bad_request"),
]


def to_response(exc: Exception) -> Response:
    """The envelope response for any exception (the DRF handler and plain views both use it)."""
    headers: dict[str, str] = {}
    if is_database_outage(exc):
        if is_database_timeout(exc):
            # Maybe a statement that is slow for a reason (a missing index): where it was, in full.
            log.error("the database stopped a statement for time", exc_info=exc)
        else:
            log.warning("database unavailable: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        exc = DatabaseUnavailable.for_error(exc)
    if isinstance(exc, RegistryError) and exc.status == 503:
        headers["Retry-After"] = str(UNAVAILABLE_RETRY_AFTER)
    if isinstance(exc, RegistryError | ExtensionError):
        info = classify_error(exc)
        code, message, details = info.code, info.message, info.details
        if isinstance(exc, RateLimited):
            headers["Retry-After"] = str(exc.retry_after)
    elif isinstance(exc, drf.Throttled):
        wait = max(1, int(getattr(exc, "wait", None) or 1))
        code, message, details = "rate_limited", f"too many requests: try again in {wait} s", []
        headers["Retry-After"] = str(wait)
    elif isinstance(exc, drf.ValidationError):
        details = _flatten(exc.detail)
        first = details[0] if details else {"path": "", "message": "invalid request"}
        where = f"{first['path']}: " if first["path"] else ""
        code, message = "bad_request", f"invalid request: {where}{first['message']}"
    elif isinstance(exc, Http404):
        code, message, details = "not_found", str(exc) or "not found", []
    elif isinstance(exc, PermissionDenied):
        code, message, details = "forbidden", str(exc) or "permission denied", []
    elif isinstance(exc, RequestDataTooBig):
        code, message, details = "archive_too_large", "request body too large", []
    elif isinstance(exc, SuspiciousOperation):
        code, message, details = "bad_request", malformed_message(exc), []
    else:
        for cls, mapped in _DRF_CODES:
            if isinstance(exc, cls):
                code, message, details = mapped, str(getattr(exc, "detail", exc)), []
                break
        else:
            if isinstance(exc, drf.APIException):
                code, message, details = "bad_request", str(exc.detail), []
            else:
                log.error("unhandled error", exc_info=exc)
                code, message, details = "internal_error", "internal error; it has been logged", []
    status = STATUS_BY_CODE.get(code, 400)
    if isinstance(exc, drf.APIException) and code not in STATUS_BY_CODE:
        status = exc.status_code
    return Response(error_body(code, message, details), status=status, headers=headers)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER: every exception becomes an envelope, never a bare 500."""
    response = to_response(exc)
    if response.status_code in (401,):
        response["WWW-Authenticate"] = 'Bearer realm="registry"'
    return response


def json_404(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse(error_body("not_found", f"no such endpoint: {request.method} {request.path}"), status=404)


def json_500(request: HttpRequest) -> JsonResponse:
    return JsonResponse(error_body("internal_error", "internal error; it has been logged"), status=500)


def json_503(error: RegistryError) -> JsonResponse:
    """The envelope of an outage (database or storage) outside DRF's views (handler500)."""
    response = JsonResponse(error_body(error.code, error.message), status=503)
    response["Retry-After"] = str(UNAVAILABLE_RETRY_AFTER)
    return response


def json_400(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse(error_body("bad_request", malformed_message(exception)), status=400)


def json_403(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse(error_body("forbidden", forbidden_message(exception)), status=403)


def forbidden_message(exception: Exception | None) -> str:
    """What a 403 refused before the views says (Django gives no exception for some)."""
    return str(exception or "") or "forbidden: this request is not allowed here"
