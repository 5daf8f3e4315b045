"""GET/HEAD of a package: streamed from storage, or a redirect to a presigned URL."""

from __future__ import annotations

from django.http import FileResponse, HttpResponse, HttpResponseBase, HttpResponseRedirect
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request

from registry import selectors, services, storage
from registry.apis.base import AnyAcceptNegotiation, ApiView, request_etag_matches
from registry.apis.shapes import NAME_PARAM, VERSION_PARAM, answers

PACKAGE_MEDIA_TYPE = "application/gzip"


class DownloadApi(ApiView):
    """GET/HEAD /api/v1/extensions/{name}/versions/{version}/download: the package.

    Files are streamed from storage; with S3 the answer is a 302 to a short-lived presigned URL.
    ``ETag`` is the quoted sha256 and ``X-Checksum-Sha256`` the bare one; ``If-None-Match`` gets a
    304. Yanked versions stay downloadable. GET (not HEAD, not 304) counts a download."""

    content_negotiation_class = AnyAcceptNegotiation

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
        row = selectors.version_get(name=name, version=version)
        filename = f"{row.extension.name}-{row.version}.tar.gz"
        etag = f'"{row.sha256}"'
        headers = {"ETag": etag, "X-Checksum-Sha256": row.sha256}
        response: HttpResponseBase
        if request_etag_matches(request, etag):
            response = HttpResponse(status=304)
        elif not body:
            response = HttpResponse(content_type=PACKAGE_MEDIA_TYPE)
            response["Content-Length"] = str(row.size)
            response["Content-Disposition"] = f'attachment; filename="{filename}"'
        elif storage.is_s3():
            response = HttpResponseRedirect(storage.presigned_url(row.storage_key, filename=filename))
            headers["Cache-Control"] = "private, no-store"  # the presigned URL expires
            services.version_record_download(version=row)
        else:
            handle = storage.open_file(row.storage_key)
            response = FileResponse(handle, as_attachment=True, filename=filename, content_type=PACKAGE_MEDIA_TYPE)
            response["Content-Length"] = str(row.size)
            services.version_record_download(version=row)
        for key, value in headers.items():
            response[key] = value
        if response.status_code != 302:
            # name@version always means the same bytes.
            response["Cache-Control"] = "public, max-age=31536000, immutable"
        return response
