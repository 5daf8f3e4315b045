"""Trusted publishing (SPEC 6.3): an extension's trusted publishers (list, add, remove: owners
only; pending publishers for a name that does not exist yet) and the exchange of an OIDC ID token
for a short-lived publish token. Thin views over registry.trusted_publishing."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import Throttled
from rest_framework.request import Request
from rest_framework.response import Response

from registry import trusted_publishing
from registry.apis.base import ApiView, base_url, ok, validated
from registry.apis.shapes import NAME_PARAM, ErrorEnvelope, envelope, iso
from registry.authentication import AuthFailureThrottle
from registry.errors import RegistryError
from registry.models import Extension, TrustedPublisher
from registry.oidc import MAX_TOKEN_CHARS

# --- shapes --------------------------------------------------------------------------------------


def publisher_data(publisher: TrustedPublisher) -> dict[str, Any]:
    problem = trusted_publishing.publisher_problem(publisher)
    return {
        "id": publisher.pk,
        "name": publisher.name,
        "pending": publisher.is_pending,
        "issuer": publisher.issuer,
        "audience": publisher.audience,
        "claims": publisher.claims,
        "added_by": publisher.added_by.get_username(),
        "added_at": iso(publisher.added_at),
        "last_used_at": iso(publisher.last_used_at),
        "reserved_until": iso(publisher.reserved_until),
        "usable": problem is None,
        "problem": problem,
    }


def _list_data(name: str, extension: Extension | None, rows: list[TrustedPublisher]) -> dict[str, Any]:
    return {"name": name, "exists": extension is not None, "trusted_publishers": [publisher_data(p) for p in rows]}


class PublisherShape(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    pending = serializers.BooleanField(help_text="for a name that does not exist yet: its first publish creates it")
    issuer = serializers.CharField()
    audience = serializers.CharField()
    claims = serializers.DictField(child=serializers.CharField(), help_text="claims a token must carry exactly")
    added_by = serializers.CharField(help_text="the user whose publish tokens an exchange answers")
    added_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    reserved_until = serializers.DateTimeField(allow_null=True, help_text="a pending publisher's reservation")
    usable = serializers.BooleanField(help_text="whether an exchange through it would be accepted now")
    problem = serializers.CharField(allow_null=True, help_text="why not, when it would not")


_LIST = envelope(
    "TrustedPublishersEnvelope",
    inline_serializer(
        "TrustedPublishers",
        {
            "name": serializers.CharField(),
            "exists": serializers.BooleanField(help_text="false: the name does not exist yet (pending publishers)"),
            "trusted_publishers": PublisherShape(many=True),
        },
    ),
)
_ONE = envelope("TrustedPublisherEnvelope", PublisherShape())


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorEnvelope, description=description)


_AUTH_ERRORS = {
    401: _error("unauthenticated: no token or session, or an invalid token"),
    403: _error("forbidden: not an owner, or the token lacks the scope owners:NAME"),
    429: _error("rate_limited: too many writes, or failed authentications, from this address"),
}
_BODY_ERRORS = {415: _error("unsupported_media_type: the body is not JSON")}
PUBLISHER_ID_PARAM = OpenApiParameter("publisher_id", int, OpenApiParameter.PATH, description="the publisher's id")

# --- input ---------------------------------------------------------------------------------------


class PublisherInput(serializers.Serializer):
    issuer = serializers.CharField(max_length=255, help_text="one of the registry's REGISTRY_OIDC_ISSUERS")
    audience = serializers.CharField(
        max_length=255, required=False, trim_whitespace=False, help_text="default: the registry's URL"
    )
    claims = serializers.DictField(
        child=serializers.CharField(max_length=trusted_publishing.MAX_CLAIM_CHARS, trim_whitespace=False),
        help_text="claim name -> the exact value a token must carry; at least one of "
        + ", ".join(trusted_publishing.IDENTIFYING_CLAIMS),
    )


class PublisherRemoveInput(serializers.Serializer):
    id = serializers.IntegerField(min_value=1)


class ExchangeInput(serializers.Serializer):
    token = serializers.CharField(max_length=MAX_TOKEN_CHARS, help_text="the OIDC ID token (a JWT) of the CI job")
    name = serializers.CharField(
        max_length=64,
        required=False,
        help_text="the extension to publish; needed only when the token matches publishers of several",
    )


# --- views ---------------------------------------------------------------------------------------


class TrustedPublishersApi(ApiView):
    """GET/POST/DELETE /api/v1/extensions/{name}/trusted-publishers/."""

    @extend_schema(
        operation_id="trusted_publishers_list",
        summary="An extension's trusted publishers (owners only)",
        description="For a name that does not exist yet: the caller's own pending publishers for it.",
        parameters=[NAME_PARAM],
        responses={
            200: _LIST,
            **_AUTH_ERRORS,
            404: _error("not_found: no such extension, and no pending publisher of the caller for the name"),
        },
        tags=["trusted publishing"],
    )
    def get(self, request: Request, name: str) -> Response:
        extension, rows = trusted_publishing.publishers_list(actor=self.actor(), name=name)
        return ok(_list_data(name, extension, rows))

    @extend_schema(
        operation_id="trusted_publishers_add",
        summary="Register a trusted publisher (pending, for a name that does not exist yet)",
        description=(
            "An owner registers an issuer, an audience and claims; any user may register a pending publisher for "
            "a name that does not exist yet, which reserves the name for REGISTRY_OIDC_PENDING_DAYS. 201 when it "
            "is new, 200 when the same issuer, audience and claims were already registered."
        ),
        parameters=[NAME_PARAM],
        request=PublisherInput,
        responses={
            201: _ONE,
            200: _ONE,
            400: _error("bad_request: an issuer not allow-listed, bad claims or audience, an invalid name"),
            **_AUTH_ERRORS,
            409: _error("name_taken: reserved, confusable with someone else's name, or reserved by another user"),
            **_BODY_ERRORS,
        },
        tags=["trusted publishing"],
    )
    def post(self, request: Request, name: str) -> Response:
        data = validated(PublisherInput, request.data)
        publisher, created = trusted_publishing.publisher_add(
            actor=self.actor(),
            name=name,
            issuer=data["issuer"],
            audience=data.get("audience") or base_url(request),
            claims=data["claims"],
        )
        return ok(publisher_data(publisher), status=201 if created else 200)

    @extend_schema(
        operation_id="trusted_publishers_remove",
        summary="Remove a trusted publisher",
        description='Removes the publisher whose id is in the JSON body `{"id"}` (or use '
        "`DELETE .../trusted-publishers/{id}/`, which needs no body) and revokes the live tokens it answered.",
        parameters=[NAME_PARAM],
        request=PublisherRemoveInput,
        responses={
            200: _ONE,
            400: _error("bad_request: no id"),
            **_AUTH_ERRORS,
            404: _error("not_found: no such extension or publisher"),
            **_BODY_ERRORS,
        },
        tags=["trusted publishing"],
    )
    def delete(self, request: Request, name: str) -> Response:
        data = validated(PublisherRemoveInput, request.data)
        publisher = trusted_publishing.publisher_remove(actor=self.actor(), name=name, publisher_id=data["id"])
        return ok(publisher_data(publisher))


class TrustedPublisherApi(ApiView):
    """DELETE /api/v1/extensions/{name}/trusted-publishers/{id}/ (no request body)."""

    @extend_schema(
        operation_id="trusted_publisher_remove",
        summary="Remove a trusted publisher",
        parameters=[NAME_PARAM, PUBLISHER_ID_PARAM],
        request=None,
        responses={200: _ONE, **_AUTH_ERRORS, 404: _error("not_found: no such extension or publisher")},
        tags=["trusted publishing"],
    )
    def delete(self, request: Request, name: str, publisher_id: int) -> Response:
        publisher = trusted_publishing.publisher_remove(actor=self.actor(), name=name, publisher_id=publisher_id)
        return ok(publisher_data(publisher))


_EXCHANGED = envelope(
    "TrustedPublishingTokenEnvelope",
    inline_serializer(
        "TrustedPublishingToken",
        {
            "token": serializers.CharField(help_text="pvr_...: shown once"),
            "name": serializers.CharField(help_text="the extension it may publish"),
            "scopes": serializers.ListField(child=serializers.CharField()),
            "expires_at": serializers.DateTimeField(),
            "user": serializers.CharField(help_text="whose token it is: the owner who registered the publisher"),
            "pending": serializers.BooleanField(help_text="the name does not exist yet: the first publish creates it"),
            "trusted_publisher": PublisherShape(),
        },
    ),
)


class TrustedPublishingExchangeApi(ApiView):
    """POST /api/v1/trusted-publishing/exchange: an OIDC ID token for a publish token. Takes no
    credentials (the JWT is the credential); refusals count as failed authentications."""

    authentication_classes: list[Any] = []

    @extend_schema(
        operation_id="trusted_publishing_exchange",
        summary="Exchange a CI job's OIDC ID token for a short-lived publish token",
        description=(
            "Verifies the JWT against its issuer's keys (issuer allow-listed, audience, exp/nbf/iat, a jti never "
            "exchanged before) and matches it against the trusted publishers; answers a pvr_ token scoped "
            "publish:NAME that expires within 15 minutes. Every exchange is audited."
        ),
        request=ExchangeInput,
        auth=[],
        responses={
            201: _EXCHANGED,
            400: _error("bad_request: no token, an invalid name, or a token that matches several extensions"),
            401: _error(
                "unauthenticated: the token is invalid (malformed, algorithm, issuer, key, signature, "
                "expired, not yet valid, already presented)"
            ),
            403: _error("forbidden: a valid token that no usable trusted publisher matches"),
            429: _error("rate_limited: too many refused exchanges or writes from this address"),
            503: _error("issuer_unavailable: the issuer's keys could not be fetched"),
            **_BODY_ERRORS,
        },
        tags=["trusted publishing"],
    )
    def post(self, request: Request) -> Response:
        throttle = AuthFailureThrottle()
        wait = throttle.blocked_for(request)
        if wait is not None:
            raise Throttled(wait=wait, detail="too many failed authentications from this address")
        data = validated(ExchangeInput, request.data)
        actor = self.actor()
        try:
            done = trusted_publishing.exchange(
                token=data["token"], name=data.get("name"), address=actor.address, registry_url=base_url(request)
            )
        except RegistryError as exc:
            if exc.status in (401, 403):
                throttle.record_failure(request)
            raise
        return ok(
            {
                "token": done.secret,
                "name": done.name,
                "scopes": done.token.scopes,
                "expires_at": iso(done.token.expires_at),
                "user": done.token.user.get_username(),
                "pending": done.publisher.is_pending,
                "trusted_publisher": publisher_data(done.publisher),
            },
            status=201,
        )
