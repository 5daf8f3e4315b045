"""Resolution endpoints: ``POST /api/v1/resolve``, the install plan
(``POST /api/v1/extensions/{kind}s/install``), and the cacheable index document
(``GET /api/v1/index/{name}``, a plain Django view: it is the hottest read)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from extensions.kinds import SINGULAR
from extensions.names import NAME_RE
from registry import resolution
from registry.apis.base import (
    ApiView,
    ResolveThrottle,
    StrictBoolean,
    base_url,
    ok,
    text_field,
    validated,
)
from registry.apis.shapes import KINDS_PARAM, InstallPlan, Resolution, answers, envelope, render
from registry.errors import NotFound
from registry.exception_handler import error_body
from registry.fastpath import CACHE_CONTROL
from registry.httpheaders import etag_matches
from registry.indexdocs import document_body
from registry.models import Extension


@csrf_exempt  # read-only: any other method is a 405, not a CSRF failure
def index_document(request: HttpRequest, name: str) -> HttpResponse:
    """Every version of one extension with sha256, size, yanked, dependencies, compatibility and
    provides, in the envelope. Canonical bytes (identical data, identical bytes), ETag, 304.
    Under gunicorn, registry.fastpath answers found documents before Django; this view answers
    everything else and the test client."""
    if request.method not in ("GET", "HEAD"):
        response = JsonResponse(
            error_body("method_not_allowed", f"{request.method} is not allowed here: use GET or HEAD"), status=405
        )
        response["Allow"] = "GET, HEAD"
        return response
    row = (
        Extension.objects.filter(name=name).values_list("index_etag", "index_json").first()
        if NAME_RE.match(name)  # (a NUL in a name would be a database error on PostgreSQL)
        else None
    )
    if row is None or not row[1]:
        return JsonResponse(error_body("not_found", f"no extension named {name!r}"), status=404)
    etag = f'"{row[0]}"'
    headers = {"ETag": etag, "Cache-Control": CACHE_CONTROL, "Vary": "Accept-Encoding"}
    if etag_matches(request.META.get("HTTP_IF_NONE_MATCH", ""), etag):
        return HttpResponse(status=304, headers=headers)
    return HttpResponse(document_body(row[1]), content_type="application/json", headers=headers)


class ResolveInput(serializers.Serializer):
    requirements = serializers.ListField(
        child=text_field(1200),
        min_length=1,
        max_length=resolution.MAX_REQUIREMENTS,
    )
    runtime_version = text_field(256, required=False, allow_null=True)
    include_prereleases = StrictBoolean(required=False, default=False)
    # The names are matched against the requirements' (unknown ones are ignored), never stored.
    locked = serializers.DictField(child=text_field(256), required=False, allow_empty=True, default=dict)

    def validate_locked(self, value: dict[str, str]) -> dict[str, str]:
        if len(value) > 1000:
            raise serializers.ValidationError("at most 1000 locked versions")
        return value


class ResolveApi(ApiView):
    """POST /api/v1/resolve: the newest versions satisfying every constraint, in install order."""

    throttle_classes = [ResolveThrottle]
    token_methods = ()  # anyone may resolve

    @extend_schema(
        operation_id="resolve",
        request=ResolveInput,
        summary="Resolve requirements to the newest versions that satisfy them, in install order",
        description=(
            "422 resolution_failed explains which requirements conflict and which versions exist "
            "(constraints as written, the normal form in details[].normal); 422 too_complex past "
            "REGISTRY_RESOLVE_TIMEOUT; 422 invalid_manifest for a requirement that does not parse."
        ),
        responses=answers({200: envelope("ResolutionEnvelope", Resolution())}, 400, 422),
        tags=["resolve"],
    )
    def post(self, request: Request) -> Response:
        data = validated(ResolveInput, request.data)
        result = resolution.resolve_requirements(
            requirements=data["requirements"],
            runtime_version=data.get("runtime_version"),
            include_prereleases=data["include_prereleases"],
            locked=data.get("locked") or None,
            cancelled=resolution.client_gone_probe(request.META),
        )
        return ok(render(Resolution, resolution.resolution_data(result, base_url(request))))


class InstallInput(serializers.Serializer):
    name = text_field(64)
    version = text_field(256, required=False, allow_null=True, allow_blank=True)
    runtime_version = text_field(256, required=False, allow_null=True)


#: The kinds with an install endpoint (a template is not installed into an infrastructure).
_KINDS = {kinds: type for kinds, type in SINGULAR.items() if type != "template"}


class InstallPlanApi(ApiView):
    """POST /api/v1/extensions/taskservs/install (also clusters, providers): the install plan."""

    throttle_classes = [ResolveThrottle]
    token_methods = ()  # anyone may plan an install

    @extend_schema(
        operation_id="install_plan",
        summary="What installing a taskserv, cluster or provider takes, dependencies first",
        parameters=[KINDS_PARAM],
        request=InstallInput,
        responses=answers({200: envelope("InstallPlanEnvelope", InstallPlan())}, 400, 404, 422),
        tags=["resolve"],
    )
    def post(self, request: Request, kinds: str) -> Response:
        kind = _KINDS.get(kinds)
        if kind is None:
            raise NotFound(f"no install endpoint for {kinds!r}: use one of {', '.join(sorted(_KINDS))}")
        data = validated(InstallInput, request.data)
        plan = resolution.install_plan(
            kind=kind,
            name=data["name"],
            version=data.get("version") or None,
            runtime_version=data.get("runtime_version"),
            base_url=base_url(request),
            cancelled=resolution.client_gone_probe(request.META),
        )
        return ok(render(InstallPlan, plan))
