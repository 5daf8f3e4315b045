"""An extension's owners: list, add, remove (owners only): thin views over registry.services."""

from __future__ import annotations

from django.contrib.auth.validators import UnicodeUsernameValidator
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from registry import services
from registry.apis.base import ApiView, StrictText, ok, validated
from registry.apis.shapes import NAME_PARAM, Owners, answers, envelope, owners_of, render
from registry.models import Extension
from registry.selectors import check_name, unknown_extension

#: Django's usernames (UnicodeUsernameValidator), at most 150 characters.
USERNAME_SCHEMA = {"type": "string", "pattern": r"^[\w.@+-]+$", "minLength": 1, "maxLength": 150}


class OwnerInput(serializers.Serializer):
    username = StrictText(max_length=150, min_length=1, validators=[UnicodeUsernameValidator()])


_OWNERS = envelope("OwnersEnvelope", Owners())


class OwnersApi(ApiView):
    """GET/POST/DELETE /api/v1/extensions/{name}/owners/ (by username)."""

    @extend_schema(
        operation_id="owners_list",
        summary="The owners of an extension (public)",
        parameters=[NAME_PARAM],
        responses=answers({200: _OWNERS}, 404),
        tags=["owners"],
    )
    def get(self, request: Request, name: str) -> Response:
        extension = Extension.objects.filter(name=check_name(name)).first()
        if extension is None:
            raise unknown_extension(name)
        return ok(render(Owners, owners_of(extension)))

    @extend_schema(
        operation_id="owners_add",
        summary="Add an owner (by username)",
        parameters=[NAME_PARAM],
        request=OwnerInput,
        responses=answers({200: _OWNERS}, 400, 403, 404),
        tags=["owners"],
    )
    def post(self, request: Request, name: str) -> Response:
        data = validated(OwnerInput, request.data)
        extension = services.owner_add(actor=self.actor(), name=name, username=data["username"])
        return ok(render(Owners, owners_of(extension)))

    @extend_schema(
        operation_id="owners_remove",
        description='Remove the owner named in the JSON body `{"username"}` (or use '
        "`DELETE /api/v1/extensions/{name}/owners/{username}/`, which needs no body).",
        summary="Remove an owner (the last one cannot be removed)",
        parameters=[NAME_PARAM],
        request=OwnerInput,
        responses=answers({200: _OWNERS}, 400, 403, 404),
        tags=["owners"],
    )
    def delete(self, request: Request, name: str) -> Response:
        data = validated(OwnerInput, request.data)
        extension = services.owner_remove(actor=self.actor(), name=name, username=data["username"])
        return ok(render(Owners, owners_of(extension)))


class OwnerApi(ApiView):
    """DELETE /api/v1/extensions/{name}/owners/{username}/: remove one owner (no request body)."""

    @extend_schema(
        operation_id="owner_remove",
        summary="Remove an owner (the last one cannot be removed)",
        parameters=[NAME_PARAM, OpenApiParameter("username", USERNAME_SCHEMA, OpenApiParameter.PATH)],
        request=None,
        responses=answers({200: _OWNERS}, 400, 403, 404),
        tags=["owners"],
    )
    def delete(self, request: Request, name: str, username: str) -> Response:
        extension = services.owner_remove(actor=self.actor(), name=name, username=username)
        return ok(render(Owners, owners_of(extension)))
