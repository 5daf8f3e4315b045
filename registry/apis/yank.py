"""Yank and unyank a version (owners only): thin views over registry.services."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from registry import services
from registry.apis.base import ApiView, ok, validated
from registry.models import Version


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
