"""An extension's owners: list, add, remove (owners only): thin views over registry.services."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from registry import services
from registry.apis.base import ApiView, ok, validated
from registry.errors import NotFound
from registry.models import Extension
from registry.selectors import check_name


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
