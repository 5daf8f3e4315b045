"""Yank and unyank a version (owners only): thin views over registry.services."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from registry import services
from registry.apis.base import ApiView, ok, text_field, validated
from registry.apis.shapes import NAME_PARAM, VERSION_PARAM, YankState, answers, envelope, render, yank_state

_STATE = envelope("YankStateEnvelope", YankState())


class YankInput(serializers.Serializer):
    reason = text_field(512, help_text="why (shown to everyone who resolves it)")


class YankApi(ApiView):
    """POST (yank, with a reason) and DELETE (undo) /api/v1/extensions/{name}/versions/{version}/yank."""

    @extend_schema(
        operation_id="version_yank",
        summary="Yank a version: resolution then skips it unless pinned or locked; it stays downloadable",
        parameters=[NAME_PARAM, VERSION_PARAM],
        request=YankInput,
        responses=answers({200: _STATE}, 400, 403, 404),
        tags=["owners"],
    )
    def post(self, request: Request, name: str, version: str) -> Response:
        data = validated(YankInput, request.data)
        row = services.version_yank(actor=self.actor(), name=name, version=version, reason=data["reason"])
        return ok(render(YankState, yank_state(row)))

    @extend_schema(
        operation_id="version_unyank",
        summary="Undo a yank",
        parameters=[NAME_PARAM, VERSION_PARAM],
        request=None,
        responses=answers({200: _STATE}, 400, 403, 404),
        tags=["owners"],
    )
    def delete(self, request: Request, name: str, version: str) -> Response:
        row = services.version_unyank(actor=self.actor(), name=name, version=version)
        return ok(render(YankState, yank_state(row)))
