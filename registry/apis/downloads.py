"""GET/HEAD of a package: streamed from storage, or a redirect to a presigned URL."""

from __future__ import annotations

from django.http import FileResponse, HttpResponse, HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request

from registry import delivery, selectors, services, storage
from registry.apis.base import AnyAcceptNegotiation, ApiView
from registry.apis.shapes import NAME_PARAM, VERSION_PARAM, answers
from registry.delivery import PACKAGE_MEDIA_TYPE


class DownloadApi(ApiView):
    """GET/HEAD /api/v1/extensions/{name}/versions/{version}/download: the package.

    The answer is registry.delivery's (the WSGI fast path gives the same one, and answers most
    downloads under gunicorn before Django): files are streamed from storage (or handed to nginx
    with X-Accel-Redirect); with S3 the answer is a 302 to a short-lived presigned URL. ``ETag`` is
    the quoted sha256 and ``X-Checksum-Sha256`` the bare one; ``If-None-Match`` gets a 304. Yanked
    versions stay downloadable. GET (not HEAD, not 304) counts a download, outside the database."""

    content_negotiation_class = AnyAcceptNegotiation
    authentication_classes = []  # anonymous: reading the session would add Vary: Cookie

    @extend_schema(
        operation_id="version_download",
        summary="Download a package (NAME-VERSION.tar.gz)",
        description=(
            "ETag is the quoted sha256 of the package and X-Checksum-Sha256 the bare one; If-None-Match "
            "answers 304. With object storage the answer is a 302 to a short-lived presigned URL. Yanked "
            "versions stay downloadable. HEAD answers the headers only."
        ),
        parameters=[NAME_PARAM, VERSION_PARAM],
        responses=answers(
            {
                (200, PACKAGE_MEDIA_TYPE): OpenApiResponse(OpenApiTypes.BINARY, description="the package"),
                302: OpenApiResponse(description="with object storage: a redirect to a short-lived presigned URL"),
                304: OpenApiResponse(description="If-None-Match named the package's ETag"),
            },
            400,
            404,
        ),
        tags=["catalog"],
    )
    def get(self, request: Request, name: str, version: str) -> HttpResponseBase:
        return self._answer(request, name, version, body=True)

    @extend_schema(exclude=True)
    def head(self, request: Request, name: str, version: str) -> HttpResponseBase:
        return self._answer(request, name, version, body=False)

    def _answer(self, request: Request, name: str, version: str, *, body: bool) -> HttpResponseBase:
        ref = delivery.package_lookup(name=selectors.check_name(name), canonical=selectors.canonical_version(version))
        if ref is None:
            selectors.version_get(name=name, version=version)  # raises the 404 that lists what exists
            raise AssertionError("unreachable: the version exists")  # pragma: no cover
        reply = delivery.answer(ref, head=not body, if_none_match=request.META.get("HTTP_IF_NONE_MATCH", ""))
        response: HttpResponseBase
        if reply.send_file:
            response = FileResponse(storage.open_sized(ref.storage_key, ref.size))
        else:
            response = HttpResponse(status=reply.status)
            del response["Content-Type"]  # a 302 or 304 describes no content of its own
        for key, value in reply.headers:
            response[key] = value
        if reply.counted:
            services.version_record_download(version=ref)
        return response
