"""What every API view shares: the success envelope, the actor of a request, authentication and
throttling classes, query-parameter parsing and content negotiation for non-JSON answers. Errors
are rendered by registry.exception_handler.exception_handler."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import RegexValidator
from django.http import HttpRequest
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView

from registry import openapi as _openapi  # noqa: F401 - registers the authentication schemes
from registry.authentication import BearerTokenAuthentication, client_address
from registry.errors import BadRequest
from registry.httpheaders import etag_matches
from registry.models import ApiToken
from registry.parsers import SafeJSONParser
from registry.tokens import Actor

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
MAX_OFFSET = 1_000_000_000


# --- request bodies: JSON types as documented, no coercion ----------------------------------------


class StrictText(serializers.CharField):
    """A string, and only a string (DRF's CharField would take 0 for "0")."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class StrictInteger(serializers.IntegerField):
    """A JSON integer, not a string of digits, a float or a boolean."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return int(super().to_internal_value(data))


class StrictBoolean(serializers.BooleanField):
    """true or false, not "yes" or 1."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


#: Not blank, no control characters (C0, DEL, C1: a name or reason is one line of text, and an
#: escape sequence in one would reach terminals and logs): the pattern documented for every text input.
TEXT_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*[^\x00-\x1f\x7f-\x9f\s][^\x00-\x1f\x7f-\x9f]*$"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class TextValidator(RegexValidator):
    """TEXT_PATTERN (so the schema documents it), saying which control character it found."""

    def __init__(self) -> None:
        super().__init__(TEXT_PATTERN, message="This field may not be blank.")

    def __call__(self, value: Any) -> None:
        found = _CONTROL.search(str(value))
        if found:
            raise DjangoValidationError(
                f"This field holds a control character (U+{ord(found[0]):04X}); allowed: one line of text "
                "without control characters (U+0000-U+001F, U+007F-U+009F).",
                code="invalid",
            )
        super().__call__(value)


def text_field(max_length: int, **options: Any) -> StrictText:
    """A required text input: a string, not blank, at most ``max_length`` characters, documented
    with the same bounds (minLength, maxLength and TEXT_PATTERN)."""
    return StrictText(
        max_length=max_length,
        min_length=1,
        validators=[TextValidator()],
        **options,
    )


def ok(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response({"success": True, "data": data}, status=status, headers=headers)


def base_url(request: HttpRequest) -> str:
    """The registry's public base URL (REGISTRY_PUBLIC_URL, else from the request)."""
    return str(settings.REGISTRY_PUBLIC_URL or request.build_absolute_uri("/").rstrip("/"))


def validated(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """The request body checked by a serializer (400 with every problem, else the clean data)."""
    if not isinstance(data, dict):
        raise BadRequest("the request body must be a JSON object")
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def actor_for(request: Request) -> Actor:
    user = request.user if request.user is not None and request.user.is_authenticated else None
    token = request.auth if isinstance(request.auth, ApiToken) else None
    return Actor(user=user, token=token, address=client_address(request))


class PublishThrottle(SimpleRateThrottle):
    """Publishes and builds per user (REGISTRY_RATE_PUBLISH), or per address when anonymous."""

    scope = "publish"

    def get_rate(self) -> str:
        return str(settings.REGISTRY_RATE_PUBLISH)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if request.method in SAFE_METHODS:
            return None
        ident = f"user-{request.user.pk}" if request.user and request.user.is_authenticated else client_address(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}


class ResolveThrottle(SimpleRateThrottle):
    """Resolution and install plans, per address (REGISTRY_RATE_RESOLVE): they cost CPU."""

    scope = "resolve"

    def get_rate(self) -> str:
        return str(settings.REGISTRY_RATE_RESOLVE)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": client_address(request) or "unknown"}


class WriteThrottle(SimpleRateThrottle):
    """Every write, per address (REGISTRY_RATE_WRITE)."""

    scope = "write"

    def get_rate(self) -> str:
        return str(settings.REGISTRY_RATE_WRITE)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if request.method in SAFE_METHODS:
            return None
        return self.cache_format % {"scope": self.scope, "ident": client_address(request) or "unknown"}


class ApiView(APIView):
    """Base class of the JSON API views: bearer tokens (and the web session, with CSRF)."""

    authentication_classes = [BearerTokenAuthentication, SessionAuthentication]
    parser_classes = [SafeJSONParser]  # uploads declare MultiPartParser themselves
    throttle_classes = [WriteThrottle]
    # No OPTIONS: DRF would answer it with its own metadata document, outside the envelope; it
    # is a 405 in the envelope (with Allow) like any other method a view does not take.
    http_method_names = ["get", "post", "put", "patch", "delete", "head"]
    #: The methods that need a token (or a session): the OpenAPI document marks those operations,
    #: and only those, as needing one (registry.openapi.RegistrySchema).
    token_methods: tuple[str, ...] = ("POST", "PUT", "PATCH", "DELETE")

    def actor(self) -> Actor:
        return actor_for(self.request)


# --- query parameters and negotiation -------------------------------------------------------------


def bad_param(name: str, allowed: str, raw: str) -> BadRequest:
    message = f"the query parameter {name} is {raw[:40]!r}: {allowed}"
    return BadRequest(message, details=[{"path": name, "message": allowed}])


def int_param(request: Request, name: str, *, default: int, minimum: int, maximum: int | None = None) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    allowed = (
        f"use a whole number from {minimum} to {maximum}"
        if maximum is not None
        else f"use a whole number, at least {minimum}"
    )
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise bad_param(name, allowed, raw)
    value = int(raw)
    if value < minimum or (maximum is not None and value > maximum):
        raise bad_param(name, allowed, raw)
    return value


def paging(request: Request) -> tuple[int, int]:
    limit = int_param(request, "limit", default=DEFAULT_LIMIT, minimum=1, maximum=MAX_LIMIT)
    offset = int_param(request, "offset", default=0, minimum=0, maximum=MAX_OFFSET)
    return limit, offset


def request_etag_matches(request: Request, etag: str) -> bool:
    """Whether If-None-Match names this ETag (weak or strong), or is ``*``."""
    return etag_matches(request.META.get("HTTP_IF_NONE_MATCH", ""), etag)


class AnyAcceptNegotiation(BaseContentNegotiation):
    """For endpoints whose success is not JSON (a package, the JSON Schema): never refuse a
    request for its Accept header; errors are still rendered as the JSON envelope."""

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser | None:
        return next(iter(parsers), None)

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderer = next(iter(renderers))
        return renderer, str(renderer.media_type)
