"""Trusted publishing (SPEC 6.3): an extension's trusted publishers (list, add, remove: owners
only; pending publishers for a name that does not exist yet) and the exchange of an OIDC ID token
for a short-lived publish token. Thin views over registry.trusted_publishing."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import Throttled
from rest_framework.request import Request
from rest_framework.response import Response

from extensions.names import NAME_PATTERN
from registry import trusted_publishing as tp
from registry.apis.base import ApiView, StrictInteger, StrictText, base_url, ok, text_field, validated
from registry.apis.shapes import NAME_PARAM, ErrorEnvelope, answers, envelope, render
from registry.authentication import AuthFailureThrottle
from registry.errors import RegistryError
from registry.models import Extension, TrustedPublisher
from registry.oidc import MAX_TOKEN_CHARS

# --- shapes --------------------------------------------------------------------------------------


def publisher_row(publisher: TrustedPublisher) -> dict[str, Any]:
    problem = tp.publisher_problem(publisher)
    return {
        "id": publisher.pk,
        "name": publisher.name,
        "pending": publisher.is_pending,
        "issuer": publisher.issuer,
        "audience": publisher.audience,
        "claims": publisher.claims,
        "added_by": publisher.added_by.get_username(),
        "added_at": publisher.added_at,
        "last_used_at": publisher.last_used_at,
        "reserved_until": publisher.reserved_until,
        "usable": problem is None,
        "problem": problem,
    }


class Publisher(serializers.Serializer):
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


class Publishers(serializers.Serializer):
    name = serializers.CharField()
    exists = serializers.BooleanField(help_text="false: the name does not exist yet (pending publishers)")
    trusted_publishers = Publisher(many=True)


class Exchanged(serializers.Serializer):
    token = serializers.CharField(help_text="pvr_...: shown once")
    name = serializers.CharField(help_text="the extension it may publish")
    scopes = serializers.ListField(child=serializers.CharField())
    expires_at = serializers.DateTimeField()
    user = serializers.CharField(help_text="whose token it is: the user who registered the publisher")
    pending = serializers.BooleanField(help_text="the name does not exist yet: the first publish creates it")
    trusted_publisher = Publisher()


_LIST = envelope("TrustedPublishersEnvelope", Publishers())
_ONE = envelope("TrustedPublisherEnvelope", Publisher())
_EXCHANGED = envelope("TrustedPublishingTokenEnvelope", Exchanged())
PUBLISHER_ID_PARAM = OpenApiParameter(
    "publisher_id", {"type": "integer", "minimum": 1}, OpenApiParameter.PATH, description="the publisher's id"
)

# --- input ---------------------------------------------------------------------------------------


class IssuerField(serializers.ChoiceField):
    """One of REGISTRY_OIDC_ISSUERS (read when the serializer is made, so the OpenAPI document
    lists the registry's own)."""

    def __init__(self, **kwargs: Any) -> None:
        issuers = list(settings.REGISTRY_OIDC_ISSUERS)
        super().__init__(choices=issuers, **kwargs)
        trusted = ", ".join(issuers).replace("{", "{{").replace("}", "}}") or "none"
        self.error_messages["invalid_choice"] = (
            '"{input}" is not an issuer this registry trusts; use one of: ' + trusted + " (as its tokens' iss says)"
        )

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid_choice", input=data)
        return super().to_internal_value(data)


_CLAIM_VALUE = {"type": "string", "pattern": tp.CLAIM_VALUE_PATTERN, "maxLength": tp.MAX_CLAIM_CHARS}


@extend_schema_field(
    {
        "type": "object",
        "properties": dict.fromkeys(tp.CLAIM_NAMES, _CLAIM_VALUE),
        "additionalProperties": False,
        "minProperties": 1,
        "maxProperties": tp.MAX_CLAIMS,
        "anyOf": [{"required": [name]} for name in tp.IDENTIFYING_CLAIMS],
        "example": {"repository": "acme/etcd", "workflow": "release", "ref": "refs/heads/main"},
    }
)
class ClaimsField(serializers.Field):
    """The claims, as given: the service checks them (registry.trusted_publishing._check_claims,
    with the rules the schema above documents) and says what is wrong with its key path."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            self.fail("invalid")
        return data

    def to_representation(self, value: Any) -> Any:
        return value

    default_error_messages = {"invalid": "Expected an object of claim names and values."}


@extend_schema_field(
    {"type": "string", "pattern": tp.AUDIENCE_PATTERN, "minLength": 1, "maxLength": tp.MAX_AUDIENCE_CHARS}
)
class AudienceField(StrictText):
    """An audience (the service checks the pattern documented here)."""


class PublisherInput(serializers.Serializer):
    issuer = IssuerField(help_text="one of the registry's REGISTRY_OIDC_ISSUERS, exactly as its tokens' iss says")
    audience = AudienceField(
        max_length=tp.MAX_AUDIENCE_CHARS,
        required=False,
        trim_whitespace=False,
        help_text="the audience tokens must have; default: the registry's URL",
    )
    claims = ClaimsField(
        help_text="claim name -> the exact value a token must carry; at least one of "
        + ", ".join(tp.IDENTIFYING_CLAIMS)
    )


class PublisherRemoveInput(serializers.Serializer):
    id = StrictInteger(min_value=1)


@extend_schema_field({"type": "string", "pattern": NAME_PATTERN, "minLength": 2, "maxLength": 64})
class NameField(StrictText):
    """An extension name (the service checks the rule)."""


class ExchangeInput(serializers.Serializer):
    token = text_field(MAX_TOKEN_CHARS, help_text="the OIDC ID token (a JWT) of the CI job")
    name = NameField(
        max_length=64,
        required=False,
        help_text="the extension to publish; needed only when the token matches publishers of several",
    )


# --- views ---------------------------------------------------------------------------------------


def _publishers(name: str, extension: Extension | None, rows: list[TrustedPublisher]) -> Any:
    return render(
        Publishers,
        {"name": name, "exists": extension is not None, "trusted_publishers": [publisher_row(p) for p in rows]},
    )


class TrustedPublishersApi(ApiView):
    """GET/POST/DELETE /api/v1/extensions/{name}/trusted-publishers/."""

    token_methods = ("GET", "POST", "DELETE")

    @extend_schema(
        operation_id="trusted_publishers_list",
        summary="An extension's trusted publishers (owners only)",
        description="For a name that does not exist yet: the caller's own pending publishers for it (404 if none).",
        parameters=[NAME_PARAM],
        responses=answers({200: _LIST}, 403, 404),
        tags=["trusted publishing"],
    )
    def get(self, request: Request, name: str) -> Response:
        extension, rows = tp.publishers_list(actor=self.actor(), name=name)
        return ok(_publishers(name, extension, rows))

    @extend_schema(
        operation_id="trusted_publishers_add",
        summary="Register a trusted publisher (pending, for a name that does not exist yet)",
        description=(
            "An owner registers an issuer, an audience and claims; any user may register a pending publisher for "
            "a name that does not exist yet, which reserves the name for REGISTRY_OIDC_PENDING_DAYS (403 past "
            "REGISTRY_OIDC_MAX_PENDING names, or when the caller's reservation of it lapsed recently; 409 when the "
            "name is reserved, confusable with someone else's, or reserved by another user). 201 when it is new, "
            "200 when the same issuer, audience and claims were already registered."
        ),
        parameters=[NAME_PARAM],
        request=PublisherInput,
        responses=answers({201: _ONE, 200: _ONE}, 400, 403, 404, 409, 415),
        tags=["trusted publishing"],
    )
    def post(self, request: Request, name: str) -> Response:
        data = validated(PublisherInput, request.data)
        publisher, created = tp.publisher_add(
            actor=self.actor(),
            name=name,
            issuer=data["issuer"],
            audience=data.get("audience") or base_url(request),
            claims=data["claims"],
        )
        return ok(render(Publisher, publisher_row(publisher)), status=201 if created else 200)

    @extend_schema(
        operation_id="trusted_publishers_remove",
        summary="Remove a trusted publisher (its live tokens are revoked)",
        description='Removes the publisher whose id is in the JSON body `{"id"}` (or use '
        "`DELETE .../trusted-publishers/{id}/`, which needs no body) and revokes the live tokens it answered.",
        parameters=[NAME_PARAM],
        request=PublisherRemoveInput,
        responses=answers({200: _ONE}, 400, 403, 404, 415),
        tags=["trusted publishing"],
    )
    def delete(self, request: Request, name: str) -> Response:
        data = validated(PublisherRemoveInput, request.data)
        publisher = tp.publisher_remove(actor=self.actor(), name=name, publisher_id=data["id"])
        return ok(render(Publisher, publisher_row(publisher)))


class TrustedPublisherApi(ApiView):
    """DELETE /api/v1/extensions/{name}/trusted-publishers/{id}/ (no request body)."""

    @extend_schema(
        operation_id="trusted_publisher_remove",
        summary="Remove a trusted publisher (its live tokens are revoked)",
        parameters=[NAME_PARAM, PUBLISHER_ID_PARAM],
        request=None,
        responses=answers({200: _ONE}, 403, 404),
        tags=["trusted publishing"],
    )
    def delete(self, request: Request, name: str, publisher_id: int) -> Response:
        publisher = tp.publisher_remove(actor=self.actor(), name=name, publisher_id=publisher_id)
        return ok(render(Publisher, publisher_row(publisher)))


class TrustedPublishingExchangeApi(ApiView):
    """POST /api/v1/trusted-publishing/exchange: an OIDC ID token for a publish token. Takes no
    credentials (the JWT is the credential); refusals count as failed authentications."""

    authentication_classes: list[Any] = []
    token_methods = ()

    @extend_schema(
        operation_id="trusted_publishing_exchange",
        summary="Exchange a CI job's OIDC ID token for a short-lived publish token",
        description=(
            "Verifies the JWT against its issuer's keys (issuer allow-listed, audience, exp/nbf/iat, a jti never "
            "presented before) and matches it against the trusted publishers; answers a pvr_ token scoped "
            "publish:NAME that expires within 15 minutes. 401: the token is not valid (details[0].reason names "
            "the check); 403: valid, but no usable trusted publisher matches it; 400: it matches several "
            "extensions and no name was given; 503 issuer_unavailable: the issuer's keys could not be fetched. "
            "Every exchange is audited."
        ),
        request=ExchangeInput,
        responses={
            **answers({201: _EXCHANGED}, 400, 403, 415),
            503: OpenApiResponse(
                ErrorEnvelope, description="issuer_unavailable: the issuer's keys could not be fetched"
            ),
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
            done = tp.exchange(
                token=data["token"], name=data.get("name"), address=actor.address, registry_url=base_url(request)
            )
        except RegistryError as exc:
            if exc.status in (401, 403):
                throttle.record_failure(request)
            raise
        answer = {
            "token": done.secret,
            "name": done.name,
            "scopes": done.token.scopes,
            "expires_at": done.token.expires_at,
            "user": done.token.user.get_username(),
            "pending": done.publisher.is_pending,
            "trusted_publisher": publisher_row(done.publisher),
        }
        return ok(render(Exchanged, answer), status=201)
