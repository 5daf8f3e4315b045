"""What every API view shares: the success envelope, the actor of a request, authentication and
throttling classes. Errors are rendered by registry.exceptions.exception_handler."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView

from registry.authentication import BearerTokenAuthentication, client_address
from registry.errors import BadRequest
from registry.models import ApiToken
from registry.parsers import SafeJSONParser
from registry.tokens import Actor

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


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

    def actor(self) -> Actor:
        return actor_for(self.request)
