"""GET /api/v1/schema/extension.json: the JSON Schema of extension.toml."""

from __future__ import annotations

import functools
import hashlib
import json

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request

from extensions.manifest import ManifestLimits, manifest_schema
from registry.apis.base import AnyAcceptNegotiation, ApiView, request_etag_matches
from registry.apis.shapes import answers
from registry.limits import manifest_limits

SCHEMA_MEDIA_TYPE = "application/schema+json"


@functools.cache
def _schema_document(limits: ManifestLimits) -> tuple[bytes, str]:
    """The schema with this registry's bounds on extension.toml's lists (settings)."""
    body = json.dumps(manifest_schema(limits), indent=2, sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n"
    return body, f'"{hashlib.sha256(body).hexdigest()}"'


class ManifestSchemaApi(ApiView):
    """GET /api/v1/schema/extension.json: the JSON Schema of extension.toml, raw (no envelope)."""

    content_negotiation_class = AnyAcceptNegotiation

    @extend_schema(
        operation_id="manifest_schema",
        summary="The JSON Schema (Draft 2020-12) of extension.toml",
        description=(
            "Served raw (not in the envelope) as application/schema+json, with an ETag; the client "
            "validates extension.toml against the same schema, offline."
        ),
        responses=answers(
            {
                (200, SCHEMA_MEDIA_TYPE): OpenApiResponse(OpenApiTypes.OBJECT, description="the schema, not enveloped"),
                304: OpenApiResponse(description="If-None-Match named the current ETag"),
            }
        ),
        tags=["catalog"],
    )
    def get(self, request: Request) -> HttpResponse:
        body, etag = _schema_document(manifest_limits())
        if request_etag_matches(request, etag):
            response = HttpResponse(status=304)
        else:
            response = HttpResponse(body, content_type=SCHEMA_MEDIA_TYPE)
        response["ETag"] = etag
        response["Cache-Control"] = "public, max-age=3600"
        return response
