"""Request bodies come with their length. Django reads a body only as far as ``Content-Length``
says, so one sent with ``Transfer-Encoding: chunked`` and no length would reach the views as
empty, answered with a misleading "the field is missing". `RequireContentLength` answers such a
request 411, saying what to send instead (the ``provisioning`` client, curl and browsers send
the length of what they upload)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

from registry.errors import STATUS_BY_CODE
from registry.exception_handler import error_body

MESSAGE = (
    "a request body must come with a Content-Length header: Transfer-Encoding {encoding!r} "
    "without one is not accepted; send the body with its length"
)
#: Methods whose requests carry no body here: whatever their framing says, nothing is read.
BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})


class RequireContentLength:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        encoding = request.META.get("HTTP_TRANSFER_ENCODING", "").strip()
        if (
            encoding
            and encoding.lower() != "identity"
            and not request.META.get("CONTENT_LENGTH")
            and request.method not in BODILESS
        ):
            message = MESSAGE.format(encoding=encoding[:100])
            status = STATUS_BY_CODE["length_required"]
            if request.path.startswith("/api/"):
                return JsonResponse(error_body("length_required", message), status=status)
            return HttpResponse(f"{message}\n", status=status, content_type="text/plain; charset=utf-8")
        return self.get_response(request)
