"""GET/HEAD /api/v1/extensions/{name}/versions/{version}/provenance: the version's signed build
provenance (SPEC 6.2), the raw DSSE envelope, exactly the bytes the signed index lists."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request

from extensions.provenance import MEDIA_TYPE
from registry.apis.base import AnyAcceptNegotiation, ApiView, request_etag_matches
from registry.apis.shapes import NAME_PARAM, VERSION_PARAM, DsseEnvelope, answers
from registry.provenance.selectors import provenance_get

#: A statement never changes; its envelope is signed again only by a provenance key rotation, so
#: caches keep it for a day (not a year, as packages, and not "immutable"): after a rotation they
#: revalidate within that (the ETag is the envelope's sha256). The signed index's copy, named by
#: digest under /tuf/targets/, is the immutable one.
CACHE_CONTROL = "public, max-age=86400"


class ProvenanceApi(ApiView):
    """The DSSE envelope of the version's in-toto statement (SLSA Provenance v1 predicate)."""

    content_negotiation_class = AnyAcceptNegotiation
    authentication_classes = []  # anonymous, and cacheable (no Vary: Cookie)

    @extend_schema(
        operation_id="version_provenance",
        summary="The signed build provenance of a version (a DSSE envelope of an in-toto statement)",
        description=(
            "The raw DSSE envelope (payloadType application/vnd.in-toto+json) of the in-toto Statement v1 with a "
            "SLSA Provenance v1 predicate the registry made when it built the version, signed with its Ed25519 "
            "provenance key (the signed index's target keys/provenance.pub). ETag is the quoted sha256 of these "
            "bytes (what the signed index lists for provenance/NAME/NAME-VERSION.intoto.json); If-None-Match "
            "answers 304. Build metadata in the URL is ignored."
        ),
        parameters=[NAME_PARAM, VERSION_PARAM],
        responses=answers(
            {
                (200, MEDIA_TYPE): OpenApiResponse(DsseEnvelope, description="the DSSE envelope"),
                304: OpenApiResponse(description="If-None-Match named the envelope's ETag"),
            },
            400,
            404,
        ),
        tags=["catalog"],
    )
    def get(self, request: Request, name: str, version: str) -> HttpResponse:
        return self._answer(request, name, version, body=True)

    @extend_schema(exclude=True)
    def head(self, request: Request, name: str, version: str) -> HttpResponse:
        return self._answer(request, name, version, body=False)

    def _answer(self, request: Request, name: str, version: str, *, body: bool) -> HttpResponse:
        found = provenance_get(name=name, version=version)
        etag = f'"{found.sha256}"'
        headers = {"ETag": etag, "Cache-Control": CACHE_CONTROL}
        if request_etag_matches(request, etag):
            response = HttpResponse(status=304, headers=headers)
            del response["Content-Type"]
            return response
        data = found.data
        response = HttpResponse(data if body else b"", content_type=MEDIA_TYPE, headers=headers)
        response["Content-Length"] = str(len(data))
        return response
