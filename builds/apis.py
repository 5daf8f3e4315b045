"""Publishing is a build: POST /api/v1/extensions/ (a built package) and POST /api/v1/builds/ (a
source archive) answer 202 with the build; GET /api/v1/builds/{id}/ follows it."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from builds import services
from builds.models import Build
from builds.serializers import BuildDocument, build_document
from builds.uploads import LimitedHashingUploadHandler, check_declared_length
from registry.apis.base import ApiView, PublishThrottle, WriteThrottle, base_url, ok
from registry.apis.catalog import ExtensionListApi
from registry.apis.shapes import answers, envelope
from registry.errors import BadRequest, NotFound


class _SubmitView(ApiView):
    parser_classes = [MultiPartParser]
    throttle_classes = [PublishThrottle, WriteThrottle]
    kind: str = Build.Kind.PACKAGE
    field: str = "file"

    def initialize_request(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Request:
        # Before authentication: a session's CSRF check reads the body, which must already stream
        # through the limiting, hashing handler (never Django's defaults).
        request.upload_handlers = [LimitedHashingUploadHandler(request, limit=settings.REGISTRY_MAX_PACKAGE_BYTES)]
        return super().initialize_request(request, *args, **kwargs)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        if request.method == "POST":
            check_declared_length(request, settings.REGISTRY_MAX_PACKAGE_BYTES)
        super().initial(request, *args, **kwargs)

    def _submit(self, request: Request) -> Response:
        actor = self.actor()
        services.require_submit_rights(actor)
        upload = request.FILES.get(self.field)
        if upload is None:
            raise BadRequest(
                f"the multipart field {self.field!r} is missing: send the "
                + ("package (NAME-VERSION.tar.gz)" if self.kind == Build.Kind.PACKAGE else "source archive (tar.gz)")
                + f" as multipart/form-data field {self.field!r}",
                details=[{"path": self.field, "message": "required"}],
            )
        handler = request.upload_handlers[0]
        build = services.build_submit(
            actor=actor,
            kind=self.kind,
            upload=upload,
            filename=upload.name or "",
            build_id=getattr(handler, "upload_id", None),
        )
        build.refresh_from_db()
        # Always 202 with the build (SPEC 3.2): in embedded mode the pipeline already ran, so its
        # status may be final (failed, with its error); with workers it is queued.
        data = build_document(build, base_url=base_url(request))
        return ok(data, status=202, headers={"Location": data["url"]})


_upload_schema = {
    "type": "object",
    "properties": {"file": {"type": "string", "format": "binary", "description": "NAME-VERSION.tar.gz"}},
    "required": ["file"],
}
_source_schema = {
    "type": "object",
    "properties": {"source": {"type": "string", "format": "binary", "description": "a tar.gz of the source"}},
    "required": ["source"],
}
_BUILD = envelope("BuildEnvelope", BuildDocument())
_SUBMITTED = OpenApiResponse(
    _BUILD,
    description=(
        "Always 202 with the build, whatever its outcome: with workers it is queued (follow its url); "
        "in embedded mode the pipeline already ran, so it may be succeeded, or failed with its error "
        "(a refused package: invalid_archive, invalid_manifest, version_exists, name_taken, forbidden, ...)"
    ),
)


class PublishApi(_SubmitView):
    """POST /api/v1/extensions/: publish a built package (multipart field ``file``)."""

    kind = Build.Kind.PACKAGE
    field = "file"

    @extend_schema(
        operation_id="extension_publish",
        summary="Publish a built package (NAME-VERSION.tar.gz)",
        request={"multipart/form-data": _upload_schema},
        responses=answers({202: _SUBMITTED}, 400, 403, 413, 415, 503),
        tags=["publish"],
    )
    def post(self, request: Request) -> Response:
        return self._submit(request)


class ExtensionsApi(PublishApi, ExtensionListApi):
    """/api/v1/extensions/: search the catalog (GET) and publish a built package (POST)."""

    # GET is registry.apis.catalog.ExtensionListApi. PublishApi comes first so that its parsers and its
    # throttles (publishes per user) are the ones used; both throttles ignore GET.
    throttle_classes = PublishApi.throttle_classes
    parser_classes = PublishApi.parser_classes


class SourceBuildApi(_SubmitView):
    """POST /api/v1/builds/: build and publish from a source archive (multipart field ``source``)."""

    kind = Build.Kind.SOURCE
    field = "source"

    @extend_schema(
        operation_id="build_from_source",
        summary="Build and publish from a source archive (a tar.gz of the source directory)",
        request={"multipart/form-data": _source_schema},
        responses=answers({202: _SUBMITTED}, 400, 403, 413, 415, 503),
        tags=["publish"],
    )
    def post(self, request: Request) -> Response:
        return self._submit(request)


class BuildDetailApi(ApiView):
    """GET /api/v1/builds/{id}/: status, step-by-step log with timings, error, resulting version."""

    @extend_schema(
        operation_id="build_get",
        summary="A build: status, step log with timings, error, resulting version",
        parameters=[OpenApiParameter("build_id", {"type": "string", "format": "uuid"}, OpenApiParameter.PATH)],
        responses=answers({200: _BUILD}, 404),
        tags=["publish"],
    )
    def get(self, request: Request, build_id: str) -> Response:
        try:
            pk = uuid.UUID(build_id)
        except ValueError:
            raise NotFound(f"no build {build_id!r}: build ids are UUIDs") from None
        build = Build.objects.select_related("submitted_by").filter(pk=pk).first()
        if build is None:
            raise NotFound(f"no build {build_id}")
        return ok(build_document(build, base_url=base_url(request)))
