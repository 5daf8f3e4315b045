"""Owner actions and accounts: yank/unyank, owners, API tokens. Thin views: validate with a
serializer, call one service, render the envelope."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from registry import services
from registry.api import ApiView, ok, validated
from registry.authentication import BasicPasswordAuthentication
from registry.errors import NotFound, Unauthenticated
from registry.models import ApiToken, Extension, Version
from registry.selectors import check_name


def _yank_data(version: Version) -> dict[str, Any]:
    return {
        "name": version.extension.name,
        "version": version.version,
        "yanked": version.yanked,
        "yanked_reason": version.yanked_reason,
        "yanked_at": version.yanked_at.isoformat() if version.yanked_at else None,
    }


class YankInput(serializers.Serializer):
    reason = serializers.CharField(max_length=512, allow_blank=False, trim_whitespace=True)


class YankApi(ApiView):
    """POST (yank, with a reason) and DELETE (undo) /api/v1/extensions/{name}/versions/{version}/yank."""

    @extend_schema(
        operation_id="version_yank",
        request=YankInput,
        responses={200: OpenApiResponse(description="the version's yank state")},
        tags=["owners"],
    )
    def post(self, request: Request, name: str, version: str) -> Response:
        data = validated(YankInput, request.data)
        row = services.version_yank(actor=self.actor(), name=name, version=version, reason=data["reason"])
        return ok(_yank_data(row))

    @extend_schema(
        operation_id="version_unyank",
        request=None,
        responses={200: OpenApiResponse(description="the version's yank state")},
        tags=["owners"],
    )
    def delete(self, request: Request, name: str, version: str) -> Response:
        row = services.version_unyank(actor=self.actor(), name=name, version=version)
        return ok(_yank_data(row))


class OwnerInput(serializers.Serializer):
    username = serializers.CharField(max_length=150)


def _owners_data(extension: Extension) -> dict[str, Any]:
    owners = extension.ownerships.select_related("user", "added_by").order_by("user__username")
    return {
        "name": extension.name,
        "owners": [
            {
                "username": o.user.get_username(),
                "added_at": o.added_at.isoformat(),
                "added_by": o.added_by.get_username() if o.added_by else None,
            }
            for o in owners
        ],
    }


class OwnersApi(ApiView):
    """GET/POST/DELETE /api/v1/extensions/{name}/owners/ (by username)."""

    @extend_schema(operation_id="owners_list", responses={200: OpenApiResponse(description="owners")}, tags=["owners"])
    def get(self, request: Request, name: str) -> Response:
        extension = Extension.objects.filter(name=check_name(name)).first()
        if extension is None:
            raise NotFound(f"no extension named {name!r}")
        return ok(_owners_data(extension))

    @extend_schema(
        operation_id="owners_add",
        request=OwnerInput,
        responses={200: OpenApiResponse(description="owners")},
        tags=["owners"],
    )
    def post(self, request: Request, name: str) -> Response:
        data = validated(OwnerInput, request.data)
        extension = services.owner_add(actor=self.actor(), name=name, username=data["username"])
        return ok(_owners_data(extension))

    @extend_schema(
        operation_id="owners_remove",
        description='Remove the owner named in the JSON body `{"username"}` (or use '
        "`DELETE /api/v1/extensions/{name}/owners/{username}/`, which needs no body).",
        request=OwnerInput,
        responses={200: OpenApiResponse(description="owners")},
        tags=["owners"],
    )
    def delete(self, request: Request, name: str) -> Response:
        data = validated(OwnerInput, request.data)
        extension = services.owner_remove(actor=self.actor(), name=name, username=data["username"])
        return ok(_owners_data(extension))


class OwnerApi(ApiView):
    """DELETE /api/v1/extensions/{name}/owners/{username}/: remove one owner (no request body)."""

    @extend_schema(
        operation_id="owner_remove",
        request=None,
        responses={200: OpenApiResponse(description="owners")},
        tags=["owners"],
    )
    def delete(self, request: Request, name: str, username: str) -> Response:
        extension = services.owner_remove(actor=self.actor(), name=name, username=username)
        return ok(_owners_data(extension))


class TokenInput(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    scopes = serializers.ListField(child=serializers.CharField(max_length=80), required=False, max_length=50)
    expires_in_days = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=3650)


class TokenRevokeInput(serializers.Serializer):
    id = serializers.IntegerField(min_value=1)


def _token_data(token: ApiToken) -> dict[str, Any]:
    return {
        "id": token.pk,
        "name": token.name,
        "prefix": token.prefix,
        "scopes": token.scopes,
        "created_at": token.created_at.isoformat(),
        "expires_at": token.expires_at.isoformat() if token.expires_at else None,
        "last_used_at": token.last_used_at.isoformat() if token.last_used_at else None,
        "revoked_at": token.revoked_at.isoformat() if token.revoked_at else None,
    }


class TokensApi(ApiView):
    """GET/POST/DELETE /api/v1/tokens/: the caller's API tokens. Authenticate with a token, the web
    session, or (to create a first token) HTTP Basic username and password."""

    authentication_classes = [*ApiView.authentication_classes, BasicPasswordAuthentication]

    @extend_schema(operation_id="tokens_list", responses={200: OpenApiResponse(description="tokens")}, tags=["tokens"])
    def get(self, request: Request) -> Response:
        actor = self.actor()
        if not actor.is_authenticated:
            raise Unauthenticated("listing tokens needs a token, a session, or a username and password")
        tokens = ApiToken.objects.filter(user=actor.user).order_by("-created_at", "-id")
        return ok([_token_data(t) for t in tokens])

    @extend_schema(
        operation_id="tokens_create",
        request=TokenInput,
        responses={201: inline_serializer("TokenCreated", {"token": serializers.CharField()})},
        tags=["tokens"],
    )
    def post(self, request: Request) -> Response:
        data = validated(TokenInput, request.data)
        token, secret = services.token_create(
            actor=self.actor(),
            name=data["name"],
            scopes=data.get("scopes"),
            expires_in_days=data.get("expires_in_days"),
        )
        return ok({**_token_data(token), "token": secret}, status=201)

    @extend_schema(
        operation_id="tokens_revoke",
        description='Revoke the token whose id is in the JSON body `{"id"}` (or use '
        "`DELETE /api/v1/tokens/{id}/`, which needs no body).",
        request=TokenRevokeInput,
        responses={200: OpenApiResponse(description="the revoked token")},
        tags=["tokens"],
    )
    def delete(self, request: Request) -> Response:
        data = validated(TokenRevokeInput, request.data)
        token = services.token_revoke(actor=self.actor(), token_id=data["id"])
        return ok(_token_data(token))


class TokenApi(TokensApi):
    """DELETE /api/v1/tokens/{id}/: revoke one of the caller's tokens (no request body)."""

    http_method_names = ["delete", "options"]

    @extend_schema(
        operation_id="token_revoke",
        request=None,
        responses={200: OpenApiResponse(description="the revoked token")},
        tags=["tokens"],
    )
    def delete(self, request: Request, token_id: int) -> Response:  # type: ignore[override]
        token = services.token_revoke(actor=self.actor(), token_id=token_id)
        return ok(_token_data(token))
