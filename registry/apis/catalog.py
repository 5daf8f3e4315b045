"""The read side of the JSON API (SPEC 3.2): search, extensions, versions, dependents and what is
provided by kind.

Thin views: validate query parameters, call a selector, render with the envelope. Names in URLs
that cannot exist (they break the naming rule) are a 404 that says why; malformed query
parameters and version strings are a 400 naming the parameter and what is allowed."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from extensions.errors import ExtensionError
from extensions.kinds import KINDS, SINGULAR, TYPES, plural, singular
from extensions.manifest import KEYWORD_RULE, MAX_KEYWORD_LENGTH, is_valid_keyword
from extensions.versions import SemVer
from registry import selectors
from registry.apis.base import ApiView, bad_param, base_url, ok, paging
from registry.apis.shapes import (
    NAME_PARAM,
    PAGING,
    SEMVER_PATTERN,
    VERSION_PARAM,
    Dependent,
    ExtensionDetail,
    ExtensionItem,
    ExtensionLookup,
    ProvidedItem,
    VersionDetail,
    answers,
    constraint_fields,
    envelope,
    extension_detail,
    extension_item,
    page_of,
    provided_item,
    render,
    version_detail,
)
from registry.errors import NotFound
from registry.selectors import SEMVER_HINT

MAX_QUERY_CHARS = 200
MAX_CATEGORY_CHARS = 64
#: What q may hold: no control characters (PostgreSQL refuses NUL in text: a 400, never a 500).
Q_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*$"
_Q_RE = re.compile(Q_PATTERN)
#: A keyword as extension.toml allows it, in any case (it is compared lower-cased); empty is none.
KEYWORD_PATTERN = rf"^[A-Za-z0-9-]{{0,{MAX_KEYWORD_LENGTH}}}$"


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
            OpenApiParameter(
                "q",
                {"type": "string", "maxLength": MAX_QUERY_CHARS, "pattern": Q_PATTERN},
                description="matches name, description and keywords, case-insensitively",
            ),
            OpenApiParameter(
                "type",
                str,
                enum=["", *TYPES, *KINDS],
                description="only this type (singular or plural); empty for every type",
            ),
            OpenApiParameter(
                "keyword",
                {"type": "string", "pattern": KEYWORD_PATTERN},
                description="only extensions with this keyword (any case); empty for any",
            ),
            OpenApiParameter(
                "category",
                {"type": "string", "maxLength": MAX_CATEGORY_CHARS, "pattern": Q_PATTERN},
                description="only extensions in this category (exactly as written); empty for any",
            ),
            OpenApiParameter(
                "runtime_version",
                {"type": "string", "pattern": f"^$|{SEMVER_PATTERN}", "maxLength": 256},
                description=(
                    "only extensions with a non-yanked version whose [compatibility] provisioning_version "
                    "admits this runtime version (SemVer); empty for any"
                ),
            ),
            OpenApiParameter(
                "sort",
                str,
                enum=["", *selectors.SORTS],
                description="relevance (default; by name without q), downloads, updated (latest publish first), name",
            ),
            *PAGING,
        ],
        responses=answers(
            {200: envelope("ExtensionSearchEnvelope", page_of("ExtensionPage", ExtensionItem(many=True)))}, 400
        ),
        tags=["catalog"],
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        q = params.get("q", "")
        if len(q) > MAX_QUERY_CHARS or not _Q_RE.match(q):
            raise bad_param("q", f"use at most {MAX_QUERY_CHARS} characters, none of them control characters", q)
        kind = params.get("type") or None
        if kind is not None:
            kind = singular(kind)
            if kind is None:
                raise bad_param("type", f"use one of {', '.join(TYPES)}", params["type"])
        keyword = (params.get("keyword") or "").lower() or None
        if keyword is not None and not is_valid_keyword(keyword):
            raise bad_param("keyword", KEYWORD_RULE, keyword)
        category = params.get("category") or None
        if category is not None and (len(category) > MAX_CATEGORY_CHARS or not _Q_RE.match(category)):
            raise bad_param(
                "category", f"use at most {MAX_CATEGORY_CHARS} characters, none of them control characters", category
            )
        runtime = None
        if params.get("runtime_version"):
            try:
                if len(params["runtime_version"]) > 256:
                    raise ExtensionError("too long")
                runtime = SemVer.parse(params["runtime_version"])
            except ExtensionError:
                raise bad_param("runtime_version", SEMVER_HINT, params["runtime_version"]) from None
        sort = params.get("sort") or "relevance"
        if sort not in selectors.SORTS:
            raise bad_param("sort", f"use one of {', '.join(selectors.SORTS)}", sort)
        limit, offset = paging(request)
        page = selectors.extension_search(
            q=q,
            type=kind,
            keyword=keyword,
            category=category,
            runtime=runtime,
            sort=sort,
            limit=limit,
            offset=offset,
        )
        base = base_url(request)
        return ok(
            {
                "items": render(
                    ExtensionItem, [extension_item(e, display, base) for e, display in page.items], many=True
                ),
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
        parameters=[NAME_PARAM],
        responses=answers({200: envelope("ExtensionEnvelope", ExtensionDetail())}, 404),
        tags=["catalog"],
    )
    def get(self, request: Request, name: str) -> Response:
        return ok(render(ExtensionDetail, extension_detail(selectors.extension_get(name=name), base_url(request))))


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
            OpenApiParameter(
                "name", NAME_PARAM.type, OpenApiParameter.PATH, description="the provided name (or extension name)"
            ),
        ],
        responses=answers({200: envelope("LookupEnvelope", ExtensionLookup())}, 404),
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
        return ok(render(ExtensionLookup, data))


class VersionDetailApi(ApiView):
    """GET /api/v1/extensions/{name}/versions/{version}/."""

    @extend_schema(
        operation_id="version_get",
        summary="One version: manifest, dependencies, provides, sha256, size, yanked, build",
        description=(
            "Build metadata in the URL is ignored (1.0.0+a finds 1.0.0). Yanked versions are shown "
            "with their reason. build is the id of the build that published the version."
        ),
        parameters=[NAME_PARAM, VERSION_PARAM],
        responses=answers({200: envelope("VersionEnvelope", VersionDetail())}, 400, 404),
        tags=["catalog"],
    )
    def get(self, request: Request, name: str, version: str) -> Response:
        return ok(
            render(VersionDetail, version_detail(selectors.version_get(name=name, version=version), base_url(request)))
        )


class DependentsApi(ApiView):
    """GET /api/v1/extensions/{name}/dependents/."""

    @extend_schema(
        operation_id="extension_dependents",
        summary="The extensions that depend on this one, and which of their versions do",
        description=(
            "Extensions with at least one version depending on this one, by name, each with those "
            "versions (newest first) and their constraints."
        ),
        parameters=[NAME_PARAM, *PAGING],
        responses=answers(
            {200: envelope("DependentsEnvelope", page_of("DependentsPage", Dependent(many=True)))}, 400, 404
        ),
        tags=["catalog"],
    )
    def get(self, request: Request, name: str) -> Response:
        limit, offset = paging(request)
        page = selectors.extension_dependents(name=name, limit=limit, offset=offset)
        items = [
            {
                "name": extension.name,
                "type": extension.type,
                "description": extension.description,
                "latest_version": extension.latest_version.version if extension.latest_version else None,
                "versions": [
                    {"version": v.version, **constraint_fields(dep.constraint, dep.written), "yanked": v.yanked}
                    for v, dep in edges
                ],
            }
            for extension, edges in page.items
        ]
        return ok(
            {
                "items": render(Dependent, items, many=True),
                "total": page.total,
                "limit": page.limit,
                "offset": page.offset,
            }
        )


class _ProvidedListApi(ApiView):
    """GET /api/v1/extensions/{providers|taskservs|clusters|templates}."""

    kind: str = ""

    def get(self, request: Request) -> Response:
        return ok(
            render(ProvidedItem, [provided_item(row) for row in selectors.provided_list(kind=self.kind)], many=True)
        )


def _provided_schema(kind: str) -> Any:
    return extend_schema(
        operation_id=f"{plural(kind)}_list",
        summary=f"Every {kind} provided by the latest version of an extension",
        description=(
            f"What the latest non-yanked version of each extension provides as a {kind}, sorted by "
            "the provided name: the name, the extension, its latest version and its description."
        ),
        responses=answers({200: envelope(f"Provided{plural(kind).title()}Envelope", ProvidedItem(many=True))}),
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
