"""The caller's API tokens: list, create, revoke: thin views over registry.services."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from registry import services
from registry.apis.base import ApiView, StrictInteger, StrictText, ok, text_field, validated
from registry.apis.shapes import Token, TokenCreated, answers, envelope, render, token_row
from registry.authentication import BasicPasswordAuthentication
from registry.tokens import SCOPE_PATTERN


@extend_schema_field({"type": "string", "pattern": SCOPE_PATTERN, "maxLength": 80})
class ScopeField(StrictText):
    """A scope, checked by registry.tokens.scope_problem in the service (its message says what
    is allowed); documented with the same pattern."""


class TokenInput(serializers.Serializer):
    name = text_field(100, help_text="a label, e.g. the machine it is for")
    scopes = serializers.ListField(
        child=ScopeField(max_length=80),
        required=False,
        min_length=1,
        max_length=50,
        help_text="publish:NAME, yank:NAME, owners:NAME (* for every name), tokens; "
        "default: all (or the calling token's)",
    )
    expires_in_days = StrictInteger(required=False, allow_null=True, min_value=1, max_value=3650)


class TokenRevokeInput(serializers.Serializer):
    id = StrictInteger(min_value=1)


_TOKEN = envelope("TokenEnvelope", Token())


class TokensApi(ApiView):
    """GET/POST/DELETE /api/v1/tokens/: the caller's API tokens. Authenticate with a token that has
    the ``tokens`` scope, the web session, or (to create a first token) HTTP Basic username and
    password."""

    authentication_classes = [*ApiView.authentication_classes, BasicPasswordAuthentication]
    token_methods = ("GET", "POST", "DELETE")

    @extend_schema(
        operation_id="tokens_list",
        summary="The caller's tokens, newest first (revoked and expired ones too; never their secrets)",
        responses=answers({200: envelope("TokenListEnvelope", Token(many=True))}, 403),
        tags=["tokens"],
    )
    def get(self, request: Request) -> Response:
        return ok(render(Token, [token_row(t) for t in services.token_list(actor=self.actor())], many=True))

    @extend_schema(
        operation_id="tokens_create",
        summary="Create a token (the secret is in the answer, this once)",
        request=TokenInput,
        responses=answers({201: envelope("TokenCreatedEnvelope", TokenCreated())}, 400, 403),
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
        return ok(render(TokenCreated, {**token_row(token), "token": secret}), status=201)

    @extend_schema(
        operation_id="tokens_revoke",
        summary="Revoke a token and every token it created",
        description='Revoke the token whose id is in the JSON body `{"id"}` (or use '
        "`DELETE /api/v1/tokens/{id}/`, which needs no body).",
        request=TokenRevokeInput,
        responses=answers({200: _TOKEN}, 400, 403, 404),
        tags=["tokens"],
    )
    def delete(self, request: Request) -> Response:
        data = validated(TokenRevokeInput, request.data)
        token = services.token_revoke(actor=self.actor(), token_id=data["id"])
        return ok(render(Token, token_row(token)))


class TokenApi(TokensApi):
    """DELETE /api/v1/tokens/{id}/: revoke one of the caller's tokens (no request body)."""

    http_method_names = ["delete"]

    @extend_schema(
        operation_id="token_revoke",
        summary="Revoke a token and every token it created",
        request=None,
        responses=answers({200: _TOKEN}, 403, 404),
        tags=["tokens"],
    )
    def delete(self, request: Request, token_id: int) -> Response:  # type: ignore[override]
        token = services.token_revoke(actor=self.actor(), token_id=token_id)
        return ok(render(Token, token_row(token)))
