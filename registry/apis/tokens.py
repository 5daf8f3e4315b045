"""The caller's API tokens: list, create, revoke: thin views over registry.services."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from registry import services
from registry.apis.base import ApiView, ok, validated
from registry.authentication import BasicPasswordAuthentication
from registry.models import ApiToken


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
    """GET/POST/DELETE /api/v1/tokens/: the caller's API tokens. Authenticate with a token that has
    the ``tokens`` scope, the web session, or (to create a first token) HTTP Basic username and
    password."""

    authentication_classes = [*ApiView.authentication_classes, BasicPasswordAuthentication]

    @extend_schema(operation_id="tokens_list", responses={200: OpenApiResponse(description="tokens")}, tags=["tokens"])
    def get(self, request: Request) -> Response:
        return ok([_token_data(t) for t in services.token_list(actor=self.actor())])

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
