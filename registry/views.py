"""Plain Django views outside the JSON API: liveness, the web catalog (server-rendered HTML pages
reading through `registry.selectors`), and the error pages.

Catalog pages carry a strict Content-Security-Policy (`CATALOG_CSP`: nothing but this origin's
scripts, styles, fonts and frames; no inline script or style), answer conditional requests with
an ETag computed from one cheap query (`django.views.decorators.http.condition`), and escape every
author-controlled text through Django's autoescaping. The one exception is a version's
``readme_html``, rendered with ``|safe`` because the build sanitized it with nh3
(`extensions.readme`, in the build sandbox) before storing it."""

from __future__ import annotations

import functools
import hashlib
import logging
import sys
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponsePermanentRedirect, JsonResponse
from django.shortcuts import render
from django.template.loader import get_template
from django.urls import Resolver404, resolve, reverse
from django.utils.safestring import mark_safe
from django.views import defaults
from django.views.decorators.http import condition, require_safe

from extensions.errors import ExtensionError
from extensions.kinds import TYPES, plural, singular
from extensions.manifest import is_valid_keyword
from extensions.names import is_valid_name
from extensions.versions import SemVer
from registry import depgraph, exception_handler, pictures, selectors, storage
from registry.apis import oci as oci_api
from registry.apis.base import base_url
from registry.apis.catalog import MAX_CATEGORY_CHARS, MAX_QUERY_CHARS
from registry.apis.shapes import download_url
from registry.errors import (
    UNAVAILABLE_RETRY_AFTER,
    BadRequest,
    DatabaseUnavailable,
    NotFound,
    StorageUnavailable,
    is_database_outage,
    is_database_timeout,
)
from registry.httpheaders import is_api_path, is_oci_path
from registry.interface import interface_section
from registry.kept import Kept
from registry.models import Extension, Version
from registry.oci import OciError
from registry.provenance.selectors import provenance_card, provenance_of

log = logging.getLogger(__name__)

#: The Content-Security-Policy of every catalog page (and the HTML error pages). README images
#: may come from any https: host (authors link badges and screenshots) or be data: URLs; plain
#: http: images are blocked (mixed content on an https registry, and a reader's address sent in
#: clear). No inline script or style anywhere: the sanitized README HTML has no style attribute,
#: and the catalog's one small script (copy buttons) is a static file.
CATALOG_CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' https: data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
#: Catalog pages may be stored by browsers and shared caches but are revalidated every time (a
#: 304 when the ETag still matches): a publish, a yank or a download shows at once.
CATALOG_CACHE_CONTROL = "public, max-age=0, must-revalidate"
#: Pages for a logged-in user (registry.account_views, registry.owner_views, and any catalog page
#: they open: its header names them) are stored by nobody.
PERSONAL_CACHE_CONTROL = "private, no-store"
PAGE_SIZE = 20
#: The URL names of the catalog's pages whose address ends with a slash.
CATALOG_DETAIL_PAGES = frozenset({"catalog-extension", "catalog-version", "catalog-build"})
MAX_PAGE_DIGITS = 9
#: Files of a version listed on its page (a package may have thousands; the rest are counted).
MAX_FILES_SHOWN = 500
MAX_DEPENDENTS_SHOWN = 50
_TEMPLATES_DIR = Path(settings.BASE_DIR) / "templates"
_STATIC_DIR = Path(__file__).resolve().parent / "static" / "registry"


# --- liveness -------------------------------------------------------------------------------------


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the database answers and package storage is reachable (registry.storage.probe)."""
    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception:
        log.exception("health check: database")
        checks["database"] = "unavailable"
    try:
        storage.probe()
        checks["storage"] = "ok"
    except Exception:
        log.exception("health check: storage")
        checks["storage"] = "unavailable"
    healthy = all(value == "ok" for value in checks.values())
    return JsonResponse(
        {"success": healthy, "data": {"status": "ok" if healthy else "unhealthy", "checks": checks}},
        status=200 if healthy else 503,
    )


# --- what every catalog page shares ---------------------------------------------------------------


@functools.cache
def catalog_revision() -> str:
    """A digest of the catalog's templates and static files, part of every ETag, so that a deploy
    that changes how pages look is never answered with a 304 for an old page."""
    digest = hashlib.sha256()
    for root in (_TEMPLATES_DIR, _STATIC_DIR):
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            digest.update(str(path.relative_to(root)).encode("utf-8") + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def catalog_etag(request: HttpRequest, *parts: object) -> str:
    """An ETag (unquoted; `condition` quotes it) from the revision, the registry's base URL (shown
    in install commands) and the page's own state."""
    text = "\0".join([catalog_revision(), base_url(request), *(str(p) for p in parts)])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def with_catalog_headers(response: HttpResponseBase) -> HttpResponseBase:
    response["Content-Security-Policy"] = CATALOG_CSP
    if "Cache-Control" not in response:
        response["Cache-Control"] = CATALOG_CACHE_CONTROL
    return response


def is_personal(request: HttpRequest) -> bool:
    """Whether the page is for a logged-in user (its header names them; owners see their controls)."""
    user = getattr(request, "user", None)
    return user is not None and bool(user.is_authenticated)


def personal_headers(response: HttpResponseBase) -> HttpResponseBase:
    """A page for a logged-in user is stored by no cache and has no validators: a 304 would show
    them the page as someone else (or the anonymous reader) saw it."""
    response["Cache-Control"] = PERSONAL_CACHE_CONTROL
    for header in ("ETag", "Last-Modified"):
        if header in response:
            del response[header]
    return response


View = Callable[..., HttpResponseBase]

#: What each web process keeps of the anonymous catalog pages it rendered (`conditional_page`).
KEPT_PAGES_BYTES = 32 * 1024 * 1024
KEPT_PAGE_SECONDS = selectors.CATALOG_CACHE_SECONDS


@dataclass(frozen=True)
class _KeptPage:
    """A 200 as its view answered it (the only status kept)."""

    headers: tuple[tuple[str, str], ...]
    content: bytes
    weight: int  # bytes held: the content, the headers and the key's path

    def response(self) -> HttpResponse:
        response = HttpResponse(self.content)
        for header, value in self.headers:
            response[header] = value
        return response


_kept_pages: Kept[tuple[str, str], _KeptPage] = Kept(
    KEPT_PAGES_BYTES, ttl=KEPT_PAGE_SECONDS, getsizeof=lambda page: page.weight
)

EtagFunc = Callable[..., str | None]


def conditional_page(etag_func: EtagFunc) -> Callable[[View], View]:
    """`condition` with ``etag_func``, and the page kept in this process (`registry.kept`): an
    anonymous GET whose ETag (the validator a client's If-None-Match is checked against: host,
    path and the page's state) is that of a page rendered in the last KEPT_PAGE_SECONDS gets
    those bytes without rendering them again. Pages for a logged-in user, pages that used the
    CSRF token or set a cookie, and anything but a 200 are never kept."""

    def decorator(view: View) -> View:
        def remembered(request: HttpRequest, *args: Any, **kwargs: Any) -> str | None:
            etag = etag_func(request, *args, **kwargs)
            request.META["registry.catalog_etag"] = etag
            return etag

        @functools.wraps(view)
        def keeping(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            etag = request.META.get("registry.catalog_etag")
            if etag is None or request.method != "GET" or is_personal(request):
                return view(request, *args, **kwargs)
            key = (request.get_full_path(), etag)
            kept = _kept_pages.get(key)
            if kept is not None:
                return kept.response()
            response = view(request, *args, **kwargs)
            if (
                isinstance(response, HttpResponse)
                and response.status_code == 200
                and not response.cookies
                and not request.META.get("CSRF_COOKIE_NEEDS_UPDATE")
            ):
                headers = tuple(response.items())
                weight = len(response.content) + sum(len(h) + len(v) for h, v in headers) + len(key[0]) + 256
                _kept_pages.put(key, _KeptPage(headers, response.content, weight))
            return response

        return condition(etag_func=remembered)(keeping)

    return decorator


def forget_pages() -> None:
    """Drop the pages this process keeps (tests begin with none)."""
    _kept_pages.clear()


def not_found_page(
    request: HttpRequest,
    message: str,
    suggestions: Sequence[str] = (),
    *,
    versions: Sequence[tuple[str, str]] = (),
    search: str = "",
) -> HttpResponse:
    """The catalog's HTML 404, saying what was not found (the message is escaped), with links to
    the close names there are, to versions that exist (``(name, version)``), and to a search."""
    context = {
        "message": message,
        "title": "Not found",
        "suggestions": [{"name": name, "url": extension_url(name)} for name in suggestions],
        "versions": [{"label": f"{n} {v}", "url": version_url(n, v)} for n, v in versions],
        "search_url": reverse("catalog-search") + "?" + urllib.parse.urlencode({"q": search}) if search else None,
        "search": search,
    }
    response = render(request, "404.html", context, status=404)
    with_catalog_headers(response)
    if is_personal(request):
        personal_headers(response)
    return response


def _without_suggestions(error: NotFound | BadRequest) -> tuple[str, list[str]]:
    """An error's message without its "did you mean" hint, and the names the hint suggested (the
    page links them instead)."""
    names: list[str] = []
    for detail in error.details:
        if isinstance(detail, dict):
            names += [str(n) for n in detail.get("suggestions") or []]
            if detail.get("suggestion"):
                names.append(str(detail["suggestion"]))
    message = error.message.split("; did you mean", 1)[0] if names else error.message
    return message, names


MAX_VERSIONS_SUGGESTED = 5


def _existing_versions(error: NotFound | BadRequest, name: object) -> list[tuple[str, str]]:
    """The newest versions a "no such version" error listed, to link them."""
    if not isinstance(name, str):
        return []
    for detail in error.details:
        if isinstance(detail, dict) and isinstance(detail.get("available"), list):
            return [(name, str(v)) for v in detail["available"][:MAX_VERSIONS_SUGGESTED]]
    return []


def catalog_page(view: View) -> View:
    """A catalog page: a name or version in the URL that does not exist (or cannot exist) is the
    HTML 404 saying why, and every answer carries the catalog's security and caching headers
    (for a logged-in user: private, never conditional)."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        personal = is_personal(request)
        if personal:  # never a 304 from the validators of a page as someone else saw it
            for header in ("HTTP_IF_NONE_MATCH", "HTTP_IF_MODIFIED_SINCE"):
                request.META.pop(header, None)
        try:
            response = view(request, *args, **kwargs)
        except (NotFound, BadRequest) as error:
            message, names = _without_suggestions(error)
            response = not_found_page(
                request, message, names, versions=_existing_versions(error, kwargs.get("name")), search=""
            )
        with_catalog_headers(response)
        return personal_headers(response) if personal else response

    return wrapper


def extension_url(name: str) -> str:
    return reverse("catalog-extension", kwargs={"name": name})


def version_url(name: str, version: str) -> str:
    return reverse("catalog-version", kwargs={"name": name, "version": version})


def _http_url(value: Any) -> str | None:
    """A URL from a manifest, only if it is http(s) (the manifest allows nothing else; this is the
    second guard before it becomes an href)."""
    if isinstance(value, str) and value.lower().startswith(("https://", "http://")):
        return value
    return None


INSTALL_COMMANDS = {
    "taskserv": "provisioning taskserv create {name} --infra DIR",
    "cluster": "provisioning cluster create {name} --infra DIR",
    "provider": "provisioning providers create {name} --infra DIR",
    "template": "provisioning module load template {name}",
}


def install_command(extension: Extension, version: str | None = None) -> str:
    """How an operator installs it with the `provisioning` client (pinned when ``version`` is given)."""
    command = INSTALL_COMMANDS.get(extension.type, INSTALL_COMMANDS["taskserv"]).format(name=extension.name)
    return f"{command} --version {version}" if version else command


def load_command(extension: Extension, version: str | None = None) -> str:
    """How a runtime loads it (`provisioning module load`)."""
    command = f"provisioning module load {extension.type} {extension.name}"
    return f"{command} --version {version}" if version else command


def _commands(extension: Extension, version: str | None = None) -> dict[str, str | None]:
    """The install command, and the load command unless it is the same (templates)."""
    install, load = install_command(extension, version), load_command(extension, version)
    return {"install": install, "load": load if load != install else None}


@dataclass(frozen=True)
class VersionView:
    """What the extension and version pages show of one version."""

    version: Version
    url: str
    download_url: str
    authors: list[str]
    license: str | None
    homepage: str | None
    repository: str | None
    keywords: list[str]
    categories: list[str]
    dependencies: list[tuple[str, str, str]]  # (name, normal form, as written), by name
    provides: list[tuple[str, list[str]]]  # (plural kind, names), only the kinds present


def _version_view(extension: Extension, version: Version) -> VersionView:
    manifest: dict[str, Any] = version.manifest if isinstance(version.manifest, dict) else {}
    provides = selectors.version_provides(version)
    return VersionView(
        version=version,
        url=version_url(extension.name, version.canonical),
        download_url=download_url("", _with_extension(version, extension)),
        authors=[str(a) for a in manifest.get("authors") or []],
        license=manifest.get("license") or None,
        homepage=_http_url(manifest.get("homepage")),
        repository=_http_url(manifest.get("repository")),
        keywords=[str(k) for k in manifest.get("keywords") or []],
        categories=[str(c) for c in manifest.get("categories") or []],
        dependencies=[(d.extension.name, d.constraint, d.written) for d in selectors.version_dependencies(version)],
        provides=[(kind, names) for kind, names in provides.items() if names],
    )


def _with_extension(version: Version, extension: Extension) -> Version:
    version.extension = extension  # already loaded: saves a query per URL
    return version


def _versions_table(extension: Extension) -> list[dict[str, Any]]:
    versions = selectors.sort_versions(extension.versions.all())
    latest_id = extension.latest_version_id
    return [
        {
            "version": v,
            "url": version_url(extension.name, v.canonical),
            "download_url": download_url("", _with_extension(v, extension)),
            "is_latest": v.pk == latest_id,
        }
        for v in versions
    ]


# --- home and search ------------------------------------------------------------------------------


def _catalog_etag(request: HttpRequest) -> str:
    return catalog_etag(request, request.get_full_path(), selectors.catalog_state())


def _home_etag(request: HttpRequest) -> str:
    # the day too: "recently" and the charts' windows move with it
    return catalog_etag(request, request.get_full_path(), selectors.catalog_state(), _today())


@catalog_page
@require_safe
@conditional_page(_home_etag)
def home(request: HttpRequest) -> HttpResponse:
    """The front page: the search box, counts, the most downloaded and recently updated
    extensions, the latest publishes, and browsing by kind."""
    stats = selectors.catalog_stats()
    kinds = []
    for kind in TYPES:  # every kind, templates too ("None published yet." when empty)
        count = stats.extensions_by_type.get(kind, 0)
        sample = selectors.extension_search(type=kind, limit=8, counted=False).items if count else []
        kinds.append(
            {
                "type": kind,
                "title": plural(kind).capitalize(),
                "count": count,
                "url": reverse("catalog-search") + "?" + urllib.parse.urlencode({"type": kind}),
                "extensions": [extension for extension, _ in sample],
            }
        )
    recent = [
        {"version": v, "url": version_url(v.extension.name, v.canonical)} for v in selectors.recent_versions(limit=10)
    ]
    context = {
        "stats": stats,
        "kinds": kinds,
        "recent": recent,
        "most_downloaded": selectors.most_downloaded(limit=8),
        "recently_updated": selectors.recently_updated(limit=8),
        "downloads_url": reverse("catalog-search") + "?sort=downloads",
        "updated_url": reverse("catalog-search") + "?sort=updated",
    }
    return render(request, "catalog/home.html", context)


@dataclass(frozen=True)
class SearchQuery:
    q: str
    type: str | None
    keyword: str | None
    category: str | None
    runtime: str | None
    sort: str
    page: int
    notices: list[str]

    @property
    def runtime_version(self) -> SemVer | None:
        return SemVer.parse(self.runtime) if self.runtime else None

    @property
    def filtered(self) -> bool:
        return bool(self.type or self.keyword or self.category or self.runtime)


SORT_LABELS = {"relevance": "Relevance", "downloads": "Most downloaded", "updated": "Recently updated", "name": "Name"}


def _printable(value: object, limit: int) -> str:
    text = "".join(ch if ch.isprintable() else " " for ch in str(value)[: limit * 4]).strip()
    return text


def _search_query(params: Any) -> SearchQuery:
    """The search page's parameters, leniently: a person typed them, so what cannot be used is
    dropped with a notice, never an error page."""
    notices: list[str] = []
    q = _printable(params.get("q", ""), MAX_QUERY_CHARS)
    if len(q) > MAX_QUERY_CHARS:
        q = q[:MAX_QUERY_CHARS]
        notices.append(f"The search was cut to its first {MAX_QUERY_CHARS} characters.")
    kind: str | None = (params.get("type") or "").strip().lower() or None
    if kind is not None:
        if singular(kind) is None:
            notices.append(f"Unknown type {kind[:40]!r} ignored: use one of {', '.join(TYPES)}.")
        kind = singular(kind)
    keyword: str | None = (params.get("keyword") or "").strip().lower() or None
    if keyword is not None and not is_valid_keyword(keyword):
        notices.append("A keyword is lower-case letters, digits and hyphens (at most 32): the filter was ignored.")
        keyword = None
    category: str | None = _printable(params.get("category") or "", MAX_CATEGORY_CHARS) or None
    if category is not None and len(category) > MAX_CATEGORY_CHARS:
        notices.append(f"A category has at most {MAX_CATEGORY_CHARS} characters: the filter was ignored.")
        category = None
    runtime: str | None = (params.get("runtime") or "").strip() or None
    if runtime is not None:
        try:
            runtime = str(SemVer.parse(runtime[:256]))
        except ExtensionError:
            notices.append(
                f"{_printable(runtime, 40)[:40]!r} is not a runtime version (use MAJOR.MINOR.PATCH, e.g. 1.4.0): "
                "the compatibility filter was ignored."
            )
            runtime = None
    sort = (params.get("sort") or "").strip().lower() or "relevance"
    if sort not in selectors.SORTS:
        notices.append(f"Unknown order {sort[:40]!r} ignored: use one of {', '.join(selectors.SORTS)}.")
        sort = "relevance"
    raw_page = (params.get("page") or "").strip()
    page = int(raw_page) if raw_page.isascii() and raw_page.isdigit() and len(raw_page) <= MAX_PAGE_DIGITS else 1
    if raw_page and page == 1 and raw_page != "1":
        notices.append("Page numbers are whole numbers from 1: showing the first page.")
    return SearchQuery(
        q=q,
        type=kind,
        keyword=keyword,
        category=category,
        runtime=runtime,
        sort=sort,
        page=max(page, 1),
        notices=notices,
    )


def _search_url(query: SearchQuery, **changes: Any) -> str:
    values = {
        "q": query.q,
        "type": query.type,
        "keyword": query.keyword,
        "category": query.category,
        "runtime": query.runtime,
        "sort": None if query.sort == "relevance" else query.sort,
        "page": query.page,
        **changes,
    }
    if values["page"] == 1:
        values["page"] = None
    if values["sort"] == "relevance":
        values["sort"] = None
    query_string = urllib.parse.urlencode({k: v for k, v in values.items() if v})
    search = reverse("catalog-search")
    return f"{search}?{query_string}" if query_string else search


def _facet_links(query: SearchQuery, facets: selectors.Facets) -> dict[str, list[dict[str, Any]]]:
    types = [{"label": "All", "value": None, "count": None, "current": query.type is None}] + [
        {"label": plural(kind).capitalize(), "value": kind, "count": n, "current": query.type == kind}
        for kind, n in facets.types
    ]
    for item in types:
        item["url"] = _search_url(query, type=item["value"], page=1)
    keywords = [
        {"label": k, "count": n, "current": query.keyword == k, "url": _search_url(query, keyword=k, page=1)}
        for k, n in facets.keywords
    ]
    categories = [
        {"label": c, "count": n, "current": query.category == c, "url": _search_url(query, category=c, page=1)}
        for c, n in facets.categories
    ]
    return {"types": types, "keywords": keywords, "categories": categories}


@catalog_page
@require_safe
@conditional_page(_catalog_etag)
def search(request: HttpRequest) -> HttpResponse:
    """Search results, ranked as the API ranks them (`selectors.extension_search`), with facets by
    type, keyword and category, a runtime compatibility filter, orders, and pages."""
    query = _search_query(request.GET)
    offset = (query.page - 1) * PAGE_SIZE
    result = selectors.extension_search(
        q=query.q,
        type=query.type,
        keyword=query.keyword,
        category=query.category,
        runtime=query.runtime_version,
        sort=query.sort,
        limit=PAGE_SIZE,
        offset=offset,
        facets=True,
    )
    assert result.facets is not None
    pages = max(1, -(-result.total // PAGE_SIZE))
    items = [
        {
            "extension": extension,
            "display": display,
            "url": extension_url(extension.name),
            "keywords": [k for k in extension.keywords_text.split(",") if k],
        }
        for extension, display in result.items
    ]
    suggestions = []
    if not result.total and query.q:
        suggestions = [
            {"name": name, "url": _search_url(query, q=name, page=1)}
            for name in selectors.close_names(query.q.lower()[:64])
        ]
    facets = _facet_links(query, result.facets)
    removable = [
        (label, value, _search_url(query, page=1, **{key: None}))
        for key, label, value in (
            ("type", "Type", query.type),
            ("keyword", "Keyword", query.keyword),
            ("category", "Category", query.category),
            ("runtime", "Runs on", query.runtime),
        )
        if value
    ]
    context = {
        "query": query,
        "q": query.q,
        "items": items,
        "total": result.total,
        "first": offset + 1,
        "last": offset + len(items),
        "page": query.page,
        "pages": pages,
        "previous_url": _search_url(query, page=query.page - 1) if 1 < query.page <= pages else None,
        "next_url": _search_url(query, page=query.page + 1) if query.page < pages else None,
        "first_url": _search_url(query, page=1) if query.page > pages else None,
        "facets": facets["types"],
        "keyword_facets": facets["keywords"],
        "category_facets": facets["categories"],
        "filters": removable,
        "sorts": [(key, label, key == query.sort) for key, label in SORT_LABELS.items()],
        "suggestions": suggestions,
        "clear_keyword_url": _search_url(query, keyword=None, page=1) if query.keyword else None,
        "title": f"Search: {query.q}" if query.q else "All extensions",
    }
    return render(request, "catalog/search.html", context)


# --- an extension, a version ----------------------------------------------------------------------

#: The window of the downloads chart, in days (UTC, today included), and the per-version columns.
DOWNLOAD_DAYS = 90
DOWNLOAD_WINDOWS = (90, 30, 7)


def _today() -> date:
    return datetime.now(UTC).date()


def _downloads(extension: Extension, version: Version | None = None) -> dict[str, Any]:
    """The downloads chart of the last `DOWNLOAD_DAYS` days (of one version, or of the whole
    extension), its numbers as a table, and each version's downloads over `DOWNLOAD_WINDOWS`."""
    today = _today()
    start = today - timedelta(days=DOWNLOAD_DAYS - 1)
    counts = selectors.downloads_per_day(extension=extension, version=version, start=start)
    series = pictures.day_series(counts, end=today, days=DOWNLOAD_DAYS)
    what = f"{extension.name} {version.version}" if version is not None else extension.name
    total = sum(n for _, n in series)
    chart = pictures.downloads_chart(
        series, title=f"Downloads of {what} per day, last {DOWNLOAD_DAYS} days", ident="downloads-chart"
    )
    per_version: list[dict[str, Any]] = []
    if version is None:
        windows = {str(days): today - timedelta(days=days - 1) for days in DOWNLOAD_WINDOWS}
        numbers = selectors.downloads_per_version(extension=extension, windows=windows)
        for v in selectors.sort_versions(extension.versions.all()):
            if v.pk in numbers or v.downloads:
                row = numbers.get(v.pk, {})
                per_version.append(
                    {
                        "version": v,
                        "url": version_url(extension.name, v.canonical),
                        "windows": [row.get(str(days), 0) for days in DOWNLOAD_WINDOWS],
                    }
                )
    return {
        "chart": mark_safe(chart),  # noqa: S308 - registry.pictures escapes every text it draws
        "total": total,
        "days": DOWNLOAD_DAYS,
        "rows": [(day, n) for day, n in reversed(series) if n],
        "windows": DOWNLOAD_WINDOWS,
        "per_version": per_version,
    }


def _graph(extension: Extension, version: Version | None) -> dict[str, Any] | None:
    if version is None:
        return None
    graph = depgraph.version_graph(name=extension.name, version=version.canonical)
    if graph is None:
        return None
    # The picture is escaped by registry.pictures, the steps by the template they were rendered with.
    return {"graph": graph, "svg": mark_safe(graph.svg), "steps": mark_safe(graph.steps_html)}  # noqa: S308


def version_provenance(version: Version) -> Mapping[str, Any] | None:
    """The provenance summary the version page shows in its Trust section, or None (then the
    section says there is none): ``builder`` (the builder id), ``source_digest`` (``sha256:…`` of
    the source archive or the uploaded package), ``source_kind``, ``statement_url`` (the DSSE
    envelope, SPEC 6.2), ``signed_by`` (key id), ``published_by``, ``finished_at`` (a datetime),
    from the provenance app's card (registry.provenance.selectors). Every value is rendered escaped."""
    card = provenance_card(version)
    statement = card.get("statement")
    if not statement:
        return None
    found = provenance_of(version)
    finished = statement.get("finished")
    try:
        finished_at = datetime.fromisoformat(str(finished).replace("Z", "+00:00")) if finished else None
    except ValueError:
        finished_at = None
    publisher = statement.get("trusted_identity") or statement.get("user")
    return {
        "builder": statement.get("builder") or "",
        "source_digest": f"sha256:{statement['upload_sha256']}" if statement.get("upload_sha256") else "",
        "source_kind": statement.get("kind") or "",
        "statement_url": card.get("url"),
        "signed_by": found.keyid if found is not None else "",
        "published_by": publisher or "",
        "trusted_issuer": statement.get("trusted_issuer") or "",
        "finished_at": finished_at,
        "verify": card.get("verify"),
    }


def _trust(extension: Extension, version: Version) -> dict[str, Any]:
    version = _with_extension(version, extension)
    return {
        "sha256": version.sha256,
        "reproducible": version.reproducible,
        "reproducible_note": version.reproducible_note,
        "signed": selectors.package_signed(version),
        "provenance": version_provenance(version),
    }


def _extension_etag(request: HttpRequest, name: str, version: str | None = None) -> str | None:
    fingerprint = selectors.extension_fingerprint(name=name)
    if fingerprint is None:
        return None  # the view answers the 404
    state = "-"
    try:
        shown = selectors.canonical_version(version) if version is not None else fingerprint.rsplit(":", 1)[1]
    except BadRequest:
        return None
    if shown != "None":
        graph = depgraph.version_graph(name=name, version=shown)
        state = graph.state if graph is not None else "-"
    return catalog_etag(request, request.path, fingerprint, state, _today())


@catalog_page
@require_safe
@conditional_page(_extension_etag)
def extension_page(request: HttpRequest, name: str) -> HttpResponse:
    """One extension: its latest version's metadata and README, every version, its downloads
    over time, the dependency graph of its latest version, and what depends on it."""
    extension = selectors.extension_get(name=name, with_readme=True)
    display = selectors.display_version(extension)
    shown = _version_view(extension, display) if display is not None else None
    dependents = selectors.extension_dependents(name=name, limit=MAX_DEPENDENTS_SHOWN, target=extension)
    context = {
        "extension": extension,
        "latest": extension.latest_version,
        "shown": shown,
        "provenance": provenance_card(_with_extension(display, extension)) if display is not None else None,
        "owners": selectors.extension_owners(extension),
        "versions": _versions_table(extension),
        "downloads": _downloads(extension),
        "graph": _graph(extension, extension.latest_version),
        "dependents": [
            {"extension": e, "url": extension_url(e.name), "edges": edges[:3], "more": len(edges) - 3}
            for e, edges in dependents.items
        ],
        "dependents_total": dependents.total,
        "dependents_more": max(0, dependents.total - len(dependents.items)),
        **_commands(extension),
        "registry": base_url(request),
        "api_url": reverse("extension-detail", kwargs={"name": extension.name}),
        "title": extension.name,
    }
    return render(request, "catalog/extension.html", context)


@catalog_page
@require_safe
@conditional_page(_extension_etag)
def version_page(request: HttpRequest, name: str, version: str) -> HttpResponseBase:
    """One version: as the extension page, plus its files, provides, compatibility, build and
    trust (checksum, reproducibility, the signed index, provenance)."""
    row = selectors.version_get(name=name, version=version)
    if version != row.canonical:
        # 1.0.0+build (or any other spelling of the same version) has one address.
        return HttpResponsePermanentRedirect(version_url(row.extension.name, row.canonical))
    extension = selectors.extension_get(name=name)
    manifest: dict[str, Any] = row.manifest if isinstance(row.manifest, dict) else {}
    files = [f for f in (row.files or []) if isinstance(f, dict)]
    build_id = selectors.version_build_id(row)
    context = {
        "extension": extension,
        "latest": extension.latest_version,
        "shown": _version_view(extension, row),
        "provenance": None,  # the Trust section shows it (version_provenance)
        "owners": selectors.extension_owners(extension),
        "versions": _versions_table(extension),
        "downloads": _downloads(extension, row),
        "graph": _graph(extension, row),
        "trust": _trust(extension, row),
        "files": files[:MAX_FILES_SHOWN],
        "files_total": len(files),
        "files_more": max(0, len(files) - MAX_FILES_SHOWN),
        "compatibility": {
            "provisioning": row.provisioning_version or None,
            # [compatibility] other than provisioning_version (shown above, normalised): tool versions.
            "tools": sorted(
                (str(k), str(v))
                for k, v in (manifest.get("compatibility") or {}).items()
                if k != "provisioning_version"
            ),
            "system_packages": [str(p) for p in manifest.get("system_packages") or []],
            "required_env": [str(e) for e in manifest.get("required_env") or []],
            "optional_env": [str(e) for e in manifest.get("optional_env") or []],
        },
        "build_url": reverse("catalog-build", kwargs={"build_id": build_id}) if build_id else None,
        "interface": interface_section(row),
        **_commands(extension, row.canonical),
        "registry": base_url(request),
        "api_url": reverse("version-detail", kwargs={"name": extension.name, "version": row.canonical}),
        "title": f"{extension.name} {row.version}",
    }
    return render(request, "catalog/version.html", context)


# --- error pages ----------------------------------------------------------------------------------


def _is_api(request: HttpRequest) -> bool:
    return is_api_path(request.path)


def handler400(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return exception_handler.json_400(request, exception)
    if is_oci_path(request.path):
        return oci_api.error_answer(
            request, OciError(400, "UNSUPPORTED", exception_handler.malformed_message(exception))
        )
    return defaults.bad_request(request, exception or Exception())


def handler403(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return exception_handler.json_403(request, exception)
    if is_oci_path(request.path):
        return oci_api.error_answer(request, OciError(403, "DENIED", exception_handler.forbidden_message(exception)))
    return defaults.permission_denied(request, exception or Exception())


def _with_slash(request: HttpRequest) -> str | None:
    """``/extensions/etcd`` for ``/extensions/etcd/``: the catalog's address with the slash, when
    that is a catalog page (APPEND_SLASH is off for the API's sake)."""
    path = request.path
    if request.method not in ("GET", "HEAD") or path.endswith("/") or path.startswith("//"):
        return None
    try:
        match = resolve(path + "/")
    except Resolver404:
        return None
    if match.url_name not in CATALOG_DETAIL_PAGES:
        return None
    query = request.META.get("QUERY_STRING", "")
    return urllib.parse.quote(path + "/") + (f"?{query}" if query else "")


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponseBase:
    if _is_api(request):
        return exception_handler.json_404(request, exception)
    target = _with_slash(request)
    if target is not None:
        return HttpResponsePermanentRedirect(target)
    # The last segment may be a name someone meant ("/etdc" or "/taskservs/kubernets").
    segment = next((part for part in reversed(request.path.split("/")) if part), "")[:64].lower()
    close = selectors.close_names(segment) if is_valid_name(segment) else []
    return not_found_page(
        request, f"There is no page at {request.path[:200]}.", close, search=segment if is_valid_name(segment) else ""
    )


def handler500(request: HttpRequest) -> HttpResponse:
    # Django calls this inside its `except`: the exception is the one being handled.
    error = sys.exc_info()[1]
    if is_database_timeout(error):  # django.request logs the traceback
        log.error("the database stopped a statement for time: %s %s", request.method, request.path[:200])
    if is_database_outage(error):
        return unavailable(request, DatabaseUnavailable.for_error(error))
    if isinstance(error, StorageUnavailable):
        return unavailable(request, error)
    if _is_api(request):
        return exception_handler.json_500(request)
    if is_oci_path(request.path):
        return oci_api.error_answer(request, OciError(500, "UNKNOWN", "internal error; it has been logged"))
    response = defaults.server_error(request)
    response["Content-Security-Policy"] = CATALOG_CSP
    return response


def unavailable(request: HttpRequest, error: DatabaseUnavailable | StorageUnavailable) -> HttpResponse:
    """The database or object storage is down, outside the API's views: a 503 in each part's own
    form (the envelope under /api/, plain text for the signed index and metrics, a page for the
    catalog), rendered without touching either."""
    retry = str(UNAVAILABLE_RETRY_AFTER)
    if _is_api(request):
        return exception_handler.json_503(error)
    if is_oci_path(request.path):
        return oci_api.error_answer(
            request, OciError(503, "UNAVAILABLE", error.message, headers={"Retry-After": retry})
        )
    if request.path.startswith(("/tuf/", "/metrics")):
        return HttpResponse(f"{error.message}\n", status=503, content_type="text/plain", headers={"Retry-After": retry})
    if isinstance(error, StorageUnavailable):
        reason = "It cannot reach its storage right now."
    elif error.timed_out:  # not down, but slow or held behind a lock
        reason = "Its database did not answer in time."
    else:
        reason = "It cannot reach its database right now."
    page = get_template("503.html").render({"reason": reason})
    response = HttpResponse(page, status=503, headers={"Retry-After": retry})
    response["Content-Security-Policy"] = CATALOG_CSP
    return response
