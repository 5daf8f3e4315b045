"""The read side of the JSON API (SPEC 3.2): search, extensions, versions, downloads, dependents,
what is provided by kind, and the JSON Schema of extension.toml.

Thin views: validate query parameters, call a selector, render with the envelope. Names in URLs
that cannot exist (they break the naming rule) are a 404 that says why; malformed query
parameters and version strings are a 400 naming the parameter and what is allowed."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable
from typing import Any

from django.http import FileResponse, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from extensions.kinds import SINGULAR, TYPES, singular
from extensions.manifest import is_valid_keyword, manifest_schema
from registry import openapi as _openapi  # noqa: F401 - registers the authentication schemes
from registry import selectors, services, storage
from registry.api import ApiView, base_url, ok
from registry.errors import BadRequest, NotFound
from registry.fastpath import etag_matches
from registry.models import Extension, Provide, Version

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
MAX_QUERY_CHARS = 200
SOURCE = "registry"
PACKAGE_MEDIA_TYPE = "application/gzip"
SCHEMA_MEDIA_TYPE = "application/schema+json"


# --- helpers --------------------------------------------------------------------------------------


def download_url(base: str, version: Version) -> str:
    return base + reverse("version-download", kwargs={"name": version.extension.name, "version": version.canonical})


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _bad_param(name: str, allowed: str, raw: str) -> BadRequest:
    message = f"the query parameter {name} is {raw[:40]!r}: {allowed}"
    return BadRequest(message, details=[{"path": name, "message": allowed}])


def _int_param(request: Request, name: str, *, default: int, minimum: int, maximum: int | None = None) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    allowed = (
        f"use a whole number from {minimum} to {maximum}"
        if maximum is not None
        else f"use a whole number, at least {minimum}"
    )
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise _bad_param(name, allowed, raw)
    value = int(raw)
    if value < minimum or (maximum is not None and value > maximum):
        raise _bad_param(name, allowed, raw)
    return value


def _paging(request: Request) -> tuple[int, int]:
    limit = _int_param(request, "limit", default=DEFAULT_LIMIT, minimum=1, maximum=MAX_LIMIT)
    offset = _int_param(request, "offset", default=0, minimum=0)
    return limit, offset


def _etag_matches(request: Request, etag: str) -> bool:
    """Whether If-None-Match names this ETag (weak or strong), or is ``*``."""
    return etag_matches(request.META.get("HTTP_IF_NONE_MATCH", ""), etag)


class AnyAcceptNegotiation(BaseContentNegotiation):
    """For endpoints whose success is not JSON (a package, the JSON Schema): never refuse a
    request for its Accept header; errors are still rendered as the JSON envelope."""

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser | None:
        return next(iter(parsers), None)

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderer = next(iter(renderers))
        return renderer, str(renderer.media_type)


# --- how things are shown -------------------------------------------------------------------------


def extension_item(extension: Extension, display: Version | None, base: str) -> dict[str, Any]:
    """A search result: the platform's registry fields. ``version`` and the download fields are
    those of the latest non-yanked version (None when every version is yanked); author,
    repository and tags come from that version, else from the newest version."""
    latest = extension.latest_version
    if latest is not None:
        latest.extension = extension  # already loaded; saves a query for download_url
    manifest: dict[str, Any] = display.manifest if display is not None else {}
    return {
        "name": extension.name,
        "type": extension.type,
        "version": latest.version if latest else None,
        "description": extension.description,
        "author": ", ".join(manifest.get("authors") or []) or None,
        "repository": manifest.get("repository"),
        "source": SOURCE,
        "published_at": _iso(latest.published_at) if latest else None,
        "download_url": download_url(base, latest) if latest else None,
        "checksum": f"sha256:{latest.sha256}" if latest else None,
        "size": latest.size if latest else None,
        "tags": list(manifest.get("keywords") or []),
        "downloads": extension.downloads,
    }


def version_summary(version: Version, base: str) -> dict[str, Any]:
    return {
        "version": version.version,
        "yanked": version.yanked,
        "yanked_reason": version.yanked_reason,
        "published_at": _iso(version.published_at),
        "sha256": version.sha256,
        "size": version.size,
        "downloads": version.downloads,
        "download_url": download_url(base, version),
    }


def extension_detail(extension: Extension, base: str) -> dict[str, Any]:
    """One extension: the search fields plus owners, versions (newest first) and metadata."""
    versions = selectors.sort_versions(extension.versions.all())
    for version in versions:
        version.extension = extension  # already loaded; saves a query per download_url
    display = selectors.display_version(extension)
    manifest: dict[str, Any] = display.manifest if display is not None else {}
    data = extension_item(extension, display, base)
    data.update(
        {
            "latest_version": data["version"],
            "license": manifest.get("license"),
            "homepage": manifest.get("homepage"),
            "provides": selectors.version_provides(display),
            "owners": sorted(o.user.get_username() for o in extension.ownerships.all()),
            "versions": [version_summary(v, base) for v in versions],
            "created_at": _iso(extension.created_at),
            "updated_at": _iso(extension.updated_at),
        }
    )
    return data


def version_detail(version: Version, base: str) -> dict[str, Any]:
    dependencies = sorted(version.dependencies.all(), key=lambda d: d.extension.name)
    return {
        "name": version.extension.name,
        "version": version.version,
        "type": version.type,
        "description": version.description,
        "manifest": version.manifest,
        "dependencies": [{"name": d.extension.name, "constraint": d.constraint} for d in dependencies],
        "provides": selectors.version_provides(version),
        "provisioning_version": version.provisioning_version or None,
        "sha256": version.sha256,
        "checksum": f"sha256:{version.sha256}",
        "size": version.size,
        "yanked": version.yanked,
        "yanked_reason": version.yanked_reason,
        "yanked_at": _iso(version.yanked_at),
        "published_at": _iso(version.published_at),
        "published_by": version.published_by.get_username() if version.published_by else None,
        "build": selectors.version_build_id(version),
        "downloads": version.downloads,
        "readme_html": version.readme_html,
        "files": version.files,
        "download_url": download_url(base, version),
    }


def provided_item(row: Provide) -> dict[str, Any]:
    extension = row.version.extension
    return {
        "name": row.name,
        "extension": extension.name,
        "version": row.version.version,
        "description": extension.description,
    }


# --- OpenAPI documentation of the shapes ----------------------------------------------------------


class ApiError(serializers.Serializer):
    code = serializers.CharField(help_text="a SPEC 3.1 error code, e.g. not_found")
    message = serializers.CharField(help_text="what is wrong and what is allowed")
    details = serializers.ListField(child=serializers.JSONField())


class ErrorEnvelope(serializers.Serializer):
    success = serializers.BooleanField(default=False)
    error = ApiError()


class ExtensionItem(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.ChoiceField(choices=TYPES)
    version = serializers.CharField(allow_null=True, help_text="latest non-yanked version; null if all are yanked")
    description = serializers.CharField()
    author = serializers.CharField(allow_null=True)
    repository = serializers.CharField(allow_null=True)
    # `source` is also an attribute of Field; DRF's metaclass takes declared fields out of the class.
    source = serializers.CharField(default=SOURCE)  # type: ignore[assignment]
    published_at = serializers.DateTimeField(allow_null=True)
    download_url = serializers.URLField(allow_null=True)
    checksum = serializers.CharField(allow_null=True, help_text='"sha256:" and the hex digest of the package')
    size = serializers.IntegerField(allow_null=True)
    tags = serializers.ListField(child=serializers.CharField(), help_text="the keywords")
    downloads = serializers.IntegerField()


class VersionSummary(serializers.Serializer):
    version = serializers.CharField()
    yanked = serializers.BooleanField()
    yanked_reason = serializers.CharField(allow_blank=True)
    published_at = serializers.DateTimeField()
    sha256 = serializers.CharField()
    size = serializers.IntegerField()
    downloads = serializers.IntegerField()
    download_url = serializers.URLField()


class Provides(serializers.Serializer):
    providers = serializers.ListField(child=serializers.CharField())
    taskservs = serializers.ListField(child=serializers.CharField())
    clusters = serializers.ListField(child=serializers.CharField())
    templates = serializers.ListField(child=serializers.CharField())


class ExtensionDetail(ExtensionItem):
    latest_version = serializers.CharField(allow_null=True)
    license = serializers.CharField(allow_null=True)
    homepage = serializers.URLField(allow_null=True)
    provides = Provides()
    owners = serializers.ListField(child=serializers.CharField(), help_text="usernames")
    versions = VersionSummary(many=True, help_text="newest first")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class ProvidedBy(serializers.Serializer):
    # A CharField: the same choices as `type` under another name would be a second enum component.
    kind = serializers.CharField(help_text="the singular kind: " + " | ".join(TYPES))
    name = serializers.CharField()
    extension = serializers.CharField()
    version = serializers.CharField(allow_null=True)


class ExtensionLookup(ExtensionDetail):
    provided_by = ProvidedBy()


class DependencyItem(serializers.Serializer):
    name = serializers.CharField()
    constraint = serializers.CharField()


class PackageFile(serializers.Serializer):
    path = serializers.CharField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()


class VersionDetail(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.CharField()
    type = serializers.ChoiceField(choices=TYPES)
    description = serializers.CharField()
    manifest = serializers.DictField(help_text="extension.toml as validated (Manifest.to_dict())")
    dependencies = DependencyItem(many=True)
    provides = Provides()
    provisioning_version = serializers.CharField(allow_null=True)
    sha256 = serializers.CharField()
    checksum = serializers.CharField()
    size = serializers.IntegerField()
    yanked = serializers.BooleanField()
    yanked_reason = serializers.CharField(allow_blank=True)
    yanked_at = serializers.DateTimeField(allow_null=True)
    published_at = serializers.DateTimeField()
    published_by = serializers.CharField(allow_null=True)
    build = serializers.UUIDField(allow_null=True, help_text="the build that published it")
    downloads = serializers.IntegerField()
    readme_html = serializers.CharField(allow_blank=True, help_text="sanitized HTML")
    files = PackageFile(many=True)
    download_url = serializers.URLField()


class DependentVersion(serializers.Serializer):
    version = serializers.CharField()
    constraint = serializers.CharField()
    yanked = serializers.BooleanField()


class Dependent(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.ChoiceField(choices=TYPES)
    description = serializers.CharField()
    latest_version = serializers.CharField(allow_null=True)
    versions = DependentVersion(many=True, help_text="its versions that depend on the extension, newest first")


class ProvidedItem(serializers.Serializer):
    name = serializers.CharField(help_text="the provided name")
    extension = serializers.CharField()
    version = serializers.CharField(help_text="the extension's latest version")
    description = serializers.CharField()


def _page_of(name: str, item: serializers.Serializer) -> Any:
    return inline_serializer(
        name,
        {
            "items": item,
            "total": serializers.IntegerField(),
            "limit": serializers.IntegerField(),
            "offset": serializers.IntegerField(),
        },
    )


def _envelope(name: str, data: Any) -> Any:
    return inline_serializer(name, {"success": serializers.BooleanField(default=True), "data": data})


_ERRORS = {
    400: OpenApiResponse(ErrorEnvelope, description="bad_request: a malformed parameter"),
    404: OpenApiResponse(ErrorEnvelope, description="not_found"),
}
_PAGING = [
    OpenApiParameter("limit", int, description=f"page size, 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT})"),
    OpenApiParameter("offset", int, description="items to skip, at least 0 (default 0)"),
]
_NAME = OpenApiParameter("name", str, OpenApiParameter.PATH, description="extension name")
_VERSION = OpenApiParameter(
    "version", str, OpenApiParameter.PATH, description="SemVer 2.0.0 version (build metadata is ignored)"
)


# --- views ----------------------------------------------------------------------------------------


class ExtensionListApi(ApiView):
    """GET /api/v1/extensions/: search and browse. (POST, publishing, is added in `builds`.)"""

    @extend_schema(
        operation_id="extension_search",
        summary="Search and browse extensions",
        description=(
            "Ranked by relevance when q is given (exact name, name prefix, name substring, exact keyword, "
            "then description or keyword substring; then downloads, then name), else by name. Items carry "
            "the latest non-yanked version; an extension whose versions are all yanked is still listed, "
            "with version, published_at, download_url, checksum and size null."
        ),
        parameters=[
            OpenApiParameter("q", str, description="matches name, description and keywords, case-insensitively"),
            OpenApiParameter("type", str, enum=list(TYPES), description="only this type"),
            OpenApiParameter("keyword", str, description="only extensions with this keyword"),
            *_PAGING,
        ],
        responses={
            200: _envelope("ExtensionSearchEnvelope", _page_of("ExtensionPage", ExtensionItem(many=True))),
            400: _ERRORS[400],
        },
        tags=["catalog"],
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        q = params.get("q", "")
        if len(q) > MAX_QUERY_CHARS or not q.isprintable():
            # (PostgreSQL refuses NUL in text: that must be a 400, never a 500.)
            raise _bad_param("q", f"use at most {MAX_QUERY_CHARS} printable characters", q)
        kind = params.get("type") or None
        if kind is not None:
            kind = singular(kind)
            if kind is None:
                raise _bad_param("type", f"use one of {', '.join(TYPES)}", params["type"])
        keyword = (params.get("keyword") or "").strip().lower() or None
        if keyword is not None and not is_valid_keyword(keyword):
            raise _bad_param("keyword", "use lower-case letters, digits and hyphens, at most 32 characters", keyword)
        limit, offset = _paging(request)
        page = selectors.extension_search(q=q, type=kind, keyword=keyword, limit=limit, offset=offset)
        base = base_url(request)
        return ok(
            {
                "items": [extension_item(e, display, base) for e, display in page.items],
                "total": page.total,
                "limit": page.limit,
                "offset": page.offset,
            }
        )


class ExtensionDetailApi(ApiView):
    """GET /api/v1/extensions/{name}/."""

    @extend_schema(
        operation_id="extension_get",
        summary="One extension: metadata, owners, latest version, versions",
        description=(
            "The search fields of the latest non-yanked version plus owners (usernames), provides, "
            "and every version (yanked ones flagged), newest first."
        ),
        parameters=[_NAME],
        responses={200: _envelope("ExtensionEnvelope", ExtensionDetail()), 404: _ERRORS[404]},
        tags=["catalog"],
    )
    def get(self, request: Request, name: str) -> Response:
        return ok(extension_detail(selectors.extension_get(name=name), base_url(request)))


class ProvidedLookupApi(ApiView):
    """GET /api/v1/extensions/{type}/{name}: the platform's lookup by kind and provided name."""

    @extend_schema(
        operation_id="extension_lookup",
        summary="The extension providing a provider, taskserv, cluster or template",
        description=(
            "Finds the extension whose latest version provides TYPE NAME (else the extension of that "
            "type named NAME) and answers like GET /api/v1/extensions/{name}/, plus provided_by."
        ),
        parameters=[
            OpenApiParameter("type", str, OpenApiParameter.PATH, enum=list(TYPES), description="singular"),
            OpenApiParameter("name", str, OpenApiParameter.PATH, description="the provided name"),
        ],
        responses={200: _envelope("LookupEnvelope", ExtensionLookup()), 404: _ERRORS[404]},
        tags=["catalog"],
    )
    def get(self, request: Request, type: str, name: str) -> Response:
        if type not in TYPES:
            one = SINGULAR.get(type)
            hint = f" (the singular {one!r})" if one else ""
            raise NotFound(
                f"unknown type {type[:40]!r}: use one of {', '.join(TYPES)}{hint}",
                details=[{"path": "type", "allowed": list(TYPES)}],
            )
        extension, row = selectors.provider_lookup(kind=type, name=name)
        data = extension_detail(extension, base_url(request))
        data["provided_by"] = {
            "kind": type,
            "name": name,
            "extension": extension.name,
            "version": row.version.version if row is not None else data["version"],
        }
        return ok(data)


class VersionDetailApi(ApiView):
    """GET /api/v1/extensions/{name}/versions/{version}/."""

    @extend_schema(
        operation_id="version_get",
        summary="One version: manifest, dependencies, provides, sha256, size, yanked, build",
        description=(
            "Build metadata in the URL is ignored (1.0.0+a finds 1.0.0). Yanked versions are shown "
            "with their reason. build is the id of the build that published the version."
        ),
        parameters=[_NAME, _VERSION],
        responses={200: _envelope("VersionEnvelope", VersionDetail()), **_ERRORS},
        tags=["catalog"],
    )
    def get(self, request: Request, name: str, version: str) -> Response:
        return ok(version_detail(selectors.version_get(name=name, version=version), base_url(request)))


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
        parameters=[_NAME, _VERSION],
        responses={
            (200, PACKAGE_MEDIA_TYPE): OpenApiResponse(OpenApiTypes.BINARY, description="the package"),
            302: OpenApiResponse(description="with object storage: a redirect to a short-lived presigned URL"),
            304: OpenApiResponse(description="If-None-Match named the package's ETag"),
            **_ERRORS,
        },
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
        if _etag_matches(request, etag):
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


class DependentsApi(ApiView):
    """GET /api/v1/extensions/{name}/dependents/."""

    @extend_schema(
        operation_id="extension_dependents",
        summary="The extensions that depend on this one, and which of their versions do",
        description=(
            "Extensions with at least one version depending on this one, by name, each with those "
            "versions (newest first) and their constraints."
        ),
        parameters=[_NAME, *_PAGING],
        responses={
            200: _envelope("DependentsEnvelope", _page_of("DependentsPage", Dependent(many=True))),
            **_ERRORS,
        },
        tags=["catalog"],
    )
    def get(self, request: Request, name: str) -> Response:
        limit, offset = _paging(request)
        page = selectors.extension_dependents(name=name, limit=limit, offset=offset)
        items = [
            {
                "name": extension.name,
                "type": extension.type,
                "description": extension.description,
                "latest_version": extension.latest_version.version if extension.latest_version else None,
                "versions": [
                    {"version": v.version, "constraint": constraint, "yanked": v.yanked} for v, constraint in edges
                ],
            }
            for extension, edges in page.items
        ]
        return ok({"items": items, "total": page.total, "limit": page.limit, "offset": page.offset})


class _ProvidedListApi(ApiView):
    """GET /api/v1/extensions/{providers|taskservs|clusters|templates}."""

    kind: str = ""

    def get(self, request: Request) -> Response:
        return ok([provided_item(row) for row in selectors.provided_list(kind=self.kind)])


def _provided_schema(kind: str) -> Any:
    return extend_schema(
        operation_id=f"{kind}s_list",
        summary=f"Every {kind} provided by the latest version of an extension",
        description=(
            f"What the latest non-yanked version of each extension provides as a {kind}, sorted by "
            "the provided name: the name, the extension, its latest version and its description."
        ),
        responses={200: _envelope(f"Provided{kind.title()}sEnvelope", ProvidedItem(many=True))},
        tags=["catalog"],
    )


class ProvidersApi(_ProvidedListApi):
    kind = "provider"

    @_provided_schema("provider")
    def get(self, request: Request) -> Response:
        return super().get(request)


class TaskservsApi(_ProvidedListApi):
    kind = "taskserv"

    @_provided_schema("taskserv")
    def get(self, request: Request) -> Response:
        return super().get(request)


class ClustersApi(_ProvidedListApi):
    kind = "cluster"

    @_provided_schema("cluster")
    def get(self, request: Request) -> Response:
        return super().get(request)


class TemplatesApi(_ProvidedListApi):
    kind = "template"

    @_provided_schema("template")
    def get(self, request: Request) -> Response:
        return super().get(request)


@functools.cache
def _schema_document() -> tuple[bytes, str]:
    body = json.dumps(manifest_schema(), indent=2, sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n"
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
        responses={
            (200, SCHEMA_MEDIA_TYPE): OpenApiResponse(OpenApiTypes.OBJECT, description="the schema, not enveloped"),
            304: OpenApiResponse(description="If-None-Match named the current ETag"),
        },
        tags=["catalog"],
    )
    def get(self, request: Request) -> HttpResponse:
        body, etag = _schema_document()
        if _etag_matches(request, etag):
            response = HttpResponse(status=304)
        else:
            response = HttpResponse(body, content_type=SCHEMA_MEDIA_TYPE)
        response["ETag"] = etag
        response["Cache-Control"] = "public, max-age=3600"
        return response
