"""Reads of the catalog that more than one place needs (the JSON API, the web catalog, metrics).

Lookups by name and version raise `NotFound` / `BadRequest` with messages that say what was
wrong and what is allowed; the API and the web views render those once.

Versions are sorted by SemVer precedence in Python: a version's precedence cannot be expressed
as a database ordering (pre-release identifiers compare numerically and lexically), and an
extension has few enough versions for that to be cheap."""

from __future__ import annotations

import functools
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date
from typing import Any, TypeVar, cast

from django.core.cache import cache
from django.db import connection
from django.db.models import (
    Case,
    Count,
    Exists,
    Expression,
    F,
    IntegerField,
    Max,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from extensions.errors import ExtensionError, VersionError
from extensions.kinds import PLURAL, TYPES
from extensions.names import NAME_RULE, is_valid_name, suggest_name
from extensions.versions import Constraint, SemVer, runs_on
from registry import thisrequest
from registry.errors import BadRequest, NotFound
from registry.kept import Kept
from registry.models import DailyDownloads, Dependency, Extension, Ownership, Provide, Version
from registry.trust.models import TrustTarget

T = TypeVar("T")
#: How long an aggregate of one catalog state is kept (`catalog_cached`): the bound is for a change
#: made outside the services (rows written by hand, a bulk load), which nothing announces.
CATALOG_CACHE_SECONDS = 60
CATALOG_GENERATION_KEY = "catalog:generation"
#: Searches whose facets each process keeps, per catalog state (`_facets_cached`).
FACET_CACHE_ENTRIES = 256


SEMVER_HINT = "use MAJOR.MINOR.PATCH as in SemVer 2.0.0 (e.g. 1.28.0, 2.0.0-rc.1)"

#: A version's large columns (up to the manifest limit, the README limit and MANIFEST.json's
#: 10,000 entries): listings and lookups never load them; a page that shows one reads it for the
#: one row it shows. Whatever was published, a read of many rows stays cheap.
VERSION_LARGE_FIELDS = ("manifest", "manifest_text", "readme_html", "files", "interface")


#: An extension's large column (its index document): listings never load it.
EXTENSION_LARGE_FIELDS = ("index_json",)


def _deferred(prefix: str, *, keep: tuple[str, ...] = ()) -> list[str]:
    return [f"{prefix}{field}" for field in VERSION_LARGE_FIELDS if field not in keep]


def semver_key(text: str) -> SemVer:
    return SemVer.parse(text)


def sort_versions(versions: Iterable[Version]) -> list[Version]:
    """Newest first, by SemVer precedence."""
    return sorted(versions, key=lambda v: semver_key(v.version), reverse=True)


# --- names and versions from URLs ----------------------------------------------------------------


def check_name(name: str, *, what: str = "extension") -> str:
    """A name from a URL: an invalid spelling can never exist, so it is a 404 that says why."""
    if is_valid_name(name):
        return name
    suggestion = suggest_name(name)
    hint = f"; did you mean {suggestion!r}?" if suggestion and suggestion != name else ""
    raise NotFound(
        f"no {what} named {name[:80]!r}: it is not a valid name ({NAME_RULE}){hint}",
        details=[{"path": "name", "message": NAME_RULE, **({"suggestion": suggestion} if hint else {})}],
    )


def canonical_version(text: str) -> str:
    """The canonical text of a version from a URL (build metadata dropped: ``1.0.0+a`` is ``1.0.0``)."""
    try:
        return str(SemVer.parse(text).without_build())
    except VersionError:
        raise BadRequest(
            f"{text[:80]!r} is not a valid version: {SEMVER_HINT}",
            details=[{"path": "version", "message": SEMVER_HINT}],
        ) from None


def close_names(name: str, *, limit: int = 3) -> list[str]:
    """Published extension names close to ``name`` (a typo's likely meaning), closest first.
    Bounded: only names with the same first letter are compared."""
    import difflib

    candidates = list(
        Extension.objects.filter(name__startswith=name[:1]).exclude(name=name).values_list("name", flat=True)[:5000]
    )
    return difflib.get_close_matches(name, candidates, n=limit, cutoff=0.7)


def unknown_extension(name: str) -> NotFound:
    """The 404 for a (valid) name no extension has: with the close names, if any."""
    close = close_names(name)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return NotFound(
        f"no extension named {name!r} in this registry{hint}",
        details=[{"path": "name", "name": name, "suggestions": close}],
    )


# --- one extension, one version --------------------------------------------------------------------


def extension_get(*, name: str, with_readme: bool = False) -> Extension:
    """An extension with its latest version, owners and versions loaded (for the detail views);
    the versions without their large columns (`VERSION_LARGE_FIELDS`), the latest one with its
    manifest (and its README ``with_readme``)."""
    check_name(name)
    extension = (
        # (the publisher of the latest version: the pages name them)
        Extension.objects.select_related("latest_version", "latest_version__published_by")
        # the latest version's manifest describes the extension; its README only the page shows
        .defer(*_deferred("latest_version__", keep=("manifest", "readme_html") if with_readme else ("manifest",)))
        .prefetch_related(
            Prefetch("ownerships__user"),
            Prefetch("versions", queryset=Version.objects.defer(*VERSION_LARGE_FIELDS).order_by("id")),
        )
        .filter(name=name)
        .first()
    )
    if extension is None:
        raise unknown_extension(name)
    return extension


def version_get(*, name: str, version: str) -> Version:
    """One version of an extension, by its canonical version (``1.0.0+a`` finds ``1.0.0``)."""
    check_name(name)
    canonical = canonical_version(version)
    row = (
        Version.objects.select_related("extension", "published_by")
        .prefetch_related("dependencies__extension", "provides")
        .filter(extension__name=name, canonical=canonical)
        .first()
    )
    if row is None:
        if not Extension.objects.filter(name=name).exists():
            raise unknown_extension(name)
        known = sort_versions(Version.objects.filter(extension__name=name).only("version"))
        shown = ", ".join(v.version for v in known[:20]) + (" ..." if len(known) > 20 else "")
        raise NotFound(
            f"{name} has no version {canonical}; published versions: {shown}",
            details=[{"available": [v.version for v in known]}],
        )
    return row


def version_build_id(version: Version) -> str | None:
    """The id of the latest succeeded build that produced this version (read through the reverse
    relation ``Version.builds``, so `registry` does not import `builds`)."""
    pk = version.builds.filter(status="succeeded").order_by("-finished_at", "-created_at").values_list("pk", flat=True)
    first = pk.first()
    return str(first) if first is not None else None


def display_version(extension: Extension) -> Version | None:
    """The version whose metadata (author, repository, keywords) describes the extension: the
    latest non-yanked one, else the newest published one even if yanked."""
    if extension.latest_version is not None:
        return extension.latest_version
    versions = list(extension.versions.all())
    return sort_versions(versions)[0] if versions else None


# --- search ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Facets:
    """Counts of the matching extensions by type, keyword and category, each counted with every
    other filter applied but its own (choosing a keyword shows how many of each type have it)."""

    types: list[tuple[str, int]]
    keywords: list[tuple[str, int]]
    categories: list[tuple[str, int]]


@dataclass(frozen=True)
class Page:
    items: list[Any]
    total: int
    limit: int
    offset: int
    facets: Facets | None = None


#: How search results may be ordered: ``relevance`` (the default with a query; by name without),
#: most ``downloads`` first, most recently ``updated`` (latest publish) first, ``name``.
SORTS = ("relevance", "downloads", "updated", "name")
#: At most this many keywords and categories in the facets (the most frequent; ties by name).
MAX_FACET_VALUES = 15
CATEGORY_SEPARATOR = "\n"


def categories_text(categories: Iterable[str]) -> str:
    """The ``Extension.categories_text`` of a list of categories: each between newlines (control
    characters, which no category needs, become spaces), so a filter is one ``contains``."""
    cleaned = ["".join(ch if ch.isprintable() else " " for ch in str(c)).strip() for c in categories]
    cleaned = [c for c in dict.fromkeys(cleaned) if c]
    return (CATEGORY_SEPARATOR + CATEGORY_SEPARATOR.join(cleaned) + CATEGORY_SEPARATOR) if cleaned else ""


def split_categories(text: str) -> list[str]:
    return [c for c in text.split(CATEGORY_SEPARATOR) if c]


def _words(q: str) -> list[str]:
    return [w for w in q.split() if w][:16]


def _search_filter(q: str) -> Q:
    """Every word of ``q`` appears (case-insensitively, anywhere) in the name, the description or
    the keywords: the same matches on SQLite and PostgreSQL."""
    condition = Q()
    for word in _words(q):
        condition &= Q(name__icontains=word) | Q(description__icontains=word) | Q(keywords_text__icontains=word)
    return condition


class _StoredSearchVector(Expression):
    """The weighted vector PostgreSQL stores with each extension row (registry/migrations/0014:
    the name A, the keywords and the description B), read from the query's own extension table
    (an inner query names it by another alias)."""

    def __init__(self) -> None:
        from django.contrib.postgres.search import SearchVectorField

        super().__init__(output_field=SearchVectorField())

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        alias = compiler.query.get_initial_alias()
        return f"{compiler.quote_name_unless_alias(alias)}.search_vector", []


def _compatible_constraints(runtime: SemVer) -> list[str]:
    """The ``provisioning_version`` texts of non-yanked versions that admit ``runtime`` (the
    resolver's rule, `extensions.versions.runs_on`): few distinct texts, parsed once each, read
    once per state of the catalog (`catalog_cached`)."""

    def texts() -> list[str]:
        query = Version.objects.filter(yanked=False).order_by().values_list("provisioning_version", flat=True)
        return sorted(query.distinct())

    return [t for t in catalog_cached("runtime-constraints", texts) if _runs_on(t, runtime)]


@functools.lru_cache(maxsize=4096)
def _parsed_constraint(text: str) -> Constraint | None:
    try:
        return Constraint.parse(text, check_satisfiable=False) if text else None
    except ExtensionError:
        return None


def _runs_on(text: str, runtime: SemVer) -> bool:
    if text and _parsed_constraint(text) is None:
        return False  # (never stored: publishing refuses it)
    return runs_on(_parsed_constraint(text), runtime)


def extension_search(
    *,
    q: str = "",
    type: str | None = None,
    keyword: str | None = None,
    category: str | None = None,
    runtime: SemVer | None = None,
    sort: str = "relevance",
    limit: int = 20,
    offset: int = 0,
    facets: bool = False,
    counted: bool = True,
) -> Page:
    """Search and browse: the one definition, for the API and the web catalog.

    ``q`` matches, case-insensitively, the name, the description and the keywords: every word of
    it must appear in one of them. Results are ranked (``sort="relevance"``): the exact name first,
    then names starting with ``q``, then names containing it, then an exact keyword, then the rest;
    within a rank, on PostgreSQL, by full-text rank (``ts_rank``: the name weighted above the
    keywords and the description, which weigh the same, so a keyword is not preferred to the
    description), then the most downloaded first, then by name. Without
    ``q`` relevance is by name. Other orders: `SORTS`. ``type``, ``keyword`` and ``category``
    filter exactly; ``runtime`` keeps the extensions with a non-yanked version that runs on that
    runtime version (its ``[compatibility] provisioning_version``). Extensions whose versions are
    all yanked are still listed (their latest version is None) so that people who look for them
    find out why they cannot install them. Items are ``(extension, display_version)`` pairs;
    ``facets`` adds the counts of `Facets`; ``counted=False`` skips counting the matches (a list
    that shows no total, such as the home page's: its ``total`` is then the items' number)."""
    if sort not in SORTS:
        raise ValueError(f"unknown sort {sort!r}: use one of {', '.join(SORTS)}")
    base: QuerySet[Extension] = Extension.objects.all()
    q = q.strip().lower()
    if q:
        base = base.filter(_search_filter(q))
    if runtime is not None:
        base = base.filter(
            Exists(
                Version.objects.filter(
                    extension=OuterRef("pk"), yanked=False, provisioning_version__in=_compatible_constraints(runtime)
                )
            )
        )
    keyword_token = f",{keyword}," if keyword else None
    category_token = f"{CATEGORY_SEPARATOR}{category}{CATEGORY_SEPARATOR}" if category else None
    query = base
    if type:
        query = query.filter(type=type)
    if keyword_token:
        query = query.filter(keywords_text__contains=keyword_token)
    if category_token:
        query = query.filter(categories_text__contains=category_token)
    query = query.defer(*EXTENSION_LARGE_FIELDS)
    if sort == "downloads":
        query = query.order_by("-downloads", "name")
    elif sort == "updated":
        query = query.order_by(F("latest_published_at").desc(nulls_last=True), "name")
    elif sort == "name" or not q:
        query = query.order_by("name")
    else:
        query = query.annotate(
            rank=Case(
                When(name=q, then=Value(0)),
                When(name__startswith=q, then=Value(1)),
                When(name__contains=q, then=Value(2)),
                When(keywords_text__contains=f",{q},", then=Value(3)),
                default=Value(4),
                output_field=IntegerField(),
            )
        )
        if connection.vendor == "postgresql":
            from django.contrib.postgres.search import SearchQuery, SearchRank

            words = SearchQuery(" ".join(_words(q)), search_type="plain", config="simple")
            query = query.annotate(text_rank=SearchRank(_StoredSearchVector(), words)).order_by(
                "rank", "-text_rank", "-downloads", "name"
            )
        else:
            query = query.order_by("rank", "-downloads", "name")
    # One query: the page's extensions are chosen (ranked, sorted and cut) before their latest
    # versions are joined, so only the page's rows are joined and ranked twice, not every match.
    window = query.filter(pk__in=query.values("pk")[offset : offset + limit]).select_related("latest_version")
    window = window.defer(*_deferred("latest_version__", keep=("manifest",)))  # a result shows authors, tags
    facet_counts = None
    if facets:  # one pass over the matches counts them and their facets
        total, facet_counts = _facets_cached(
            (q, type, keyword_token, category_token, str(runtime)),
            lambda: _facets(base, type, keyword_token, category_token),
        )
        page = list(window) if offset < total else []
    elif counted:
        total = query.count()
        page = list(window) if offset < total else []
    else:
        page = list(window)
        total = len(page)
    return Page(items=with_display_versions(page), total=total, limit=limit, offset=offset, facets=facet_counts)


_facet_cache: Kept[tuple[str, ...], tuple[int, Facets]] = Kept(FACET_CACHE_ENTRIES)


def _facets_cached(search: tuple[str | None, ...], compute: Callable[[], tuple[int, Facets]]) -> tuple[int, Facets]:
    """``compute()`` (the counts of `_facets` for ``search``, its filters) as of the catalog's
    current state (`catalog_state`), kept in this process for the FACET_CACHE_ENTRIES searches
    asked last (`registry.kept`): a popular search counts its matches once per change of the
    catalog, not per page."""
    key = (catalog_state(), *(part or "" for part in search))
    found = _facet_cache.get(key)
    if found is None:
        found = compute()
        _facet_cache.put(key, found)
    return found


def forget_facets() -> None:
    """Drop this process's kept facets (tests begin with none)."""
    _facet_cache.clear()


def _facets(
    base: QuerySet[Extension], type: str | None, keyword: str | None, category: str | None
) -> tuple[int, Facets]:
    """One pass over the rows ``base`` matches (``q`` and ``runtime`` applied): how many of them
    also match ``type``, ``keyword`` and ``category`` (the search's total), and the facets, each
    counted with every other filter applied but its own. ``keyword`` and ``category`` are the
    tokens searched for (``,kv,``, newline-delimited), matched as the filters match them."""
    types: dict[str, int] = dict.fromkeys(TYPES, 0)
    keywords: Counter[str] = Counter()
    categories: Counter[str] = Counter()
    total = 0
    rows = base.order_by().values_list("type", "keywords_text", "categories_text")
    for kind, keywords_text, categories_text_ in rows.iterator(chunk_size=2000):
        has_keyword = not keyword or keyword in keywords_text
        has_category = not category or category in categories_text_
        of_type = not type or kind == type
        if has_keyword and has_category:
            types[kind] = types.get(kind, 0) + 1
            total += of_type
        if of_type and has_category:
            keywords.update(k for k in keywords_text.split(",") if k)
        if of_type and has_keyword:
            categories.update(split_categories(categories_text_))

    def top(counter: Counter[str]) -> list[tuple[str, int]]:
        return sorted(counter.items(), key=lambda item: (-item[1], item[0]))[:MAX_FACET_VALUES]

    return total, Facets(types=list(types.items()), keywords=top(keywords), categories=top(categories))


def with_display_versions(extensions: list[Extension]) -> list[tuple[Extension, Version | None]]:
    """Each extension with its `display_version`, in one query for those whose versions are all
    yanked."""
    orphans = [e.pk for e in extensions if e.latest_version is None]
    newest: dict[int, Version] = {}
    if orphans:
        by_extension: dict[int, list[Version]] = {}
        for v in Version.objects.filter(extension_id__in=orphans).defer(*_deferred("", keep=("manifest",))):
            by_extension.setdefault(v.extension_id, []).append(v)
        newest = {pk: sort_versions(vs)[0] for pk, vs in by_extension.items()}
    return [(e, e.latest_version or newest.get(e.pk)) for e in extensions]


# --- dependents -----------------------------------------------------------------------------------


def extension_dependents(*, name: str, limit: int = 20, offset: int = 0, target: Extension | None = None) -> Page:
    """The extensions that have a version depending on ``name``, by name; each item is
    ``(extension, [(version, dependency row), ...newest first])``. ``target``: the extension
    ``name``, when the caller has it already."""
    if target is None or target.name != name:
        target = Extension.objects.filter(name=check_name(name)).first()
    if target is None:
        raise unknown_extension(name)
    dependents = (
        Extension.objects.filter(versions__dependencies__extension=target)
        .distinct()
        .select_related("latest_version")
        .defer(*EXTENSION_LARGE_FIELDS, *_deferred("latest_version__"))
        .order_by("name")
    )
    total = dependents.count()
    page = list(dependents[offset : offset + limit]) if offset < total else []
    edges: dict[int, list[tuple[Version, Dependency]]] = {}
    for dep in (
        Dependency.objects.filter(extension=target, version__extension__in=page)
        .select_related("version")
        .defer(*_deferred("version__"))
    ):
        edges.setdefault(dep.version.extension_id, []).append((dep.version, dep))
    items = [(e, sorted(edges.get(e.pk, []), key=lambda vc: semver_key(vc[0].version), reverse=True)) for e in page]
    return Page(items=items, total=total, limit=limit, offset=offset)


# --- what is provided -----------------------------------------------------------------------------


def provided_list(*, kind: str) -> list[Provide]:
    """What the latest non-yanked version of every extension provides of one kind (singular),
    sorted by provided name, then extension name. Each row has ``version.extension`` loaded."""
    return list(
        Provide.objects.filter(kind=kind, version__extension__latest_version=F("version"))
        .select_related("version__extension")
        .only("name", "kind", "version__version", "version__extension__name", "version__extension__description")
        .order_by("name", "version__extension__name")
    )


def provider_lookup(*, kind: str, name: str) -> tuple[Extension, Provide | None]:
    """The extension that provides ``kind`` ``name`` in its latest non-yanked version; else an
    extension of that type named ``name``. When several extensions provide it (one owner may
    publish it from two), the one named ``name`` wins, then the most downloaded."""
    check_name(name, what=kind)
    rows = list(
        Provide.objects.filter(kind=kind, name=name, version__extension__latest_version=F("version"))
        .select_related("version__extension")
        .only("name", "kind", "version__version", "version__extension__name", "version__extension__downloads")
        .order_by("version__extension__name")
    )
    if rows:
        rows.sort(key=lambda p: (p.version.extension.name != name, -p.version.extension.downloads))
        return extension_get(name=rows[0].version.extension.name), rows[0]
    extension = Extension.objects.filter(name=name, type=kind).only("name").first()
    if extension is None:
        raise NotFound(f"no extension provides the {kind} {name!r} in this registry")
    return extension_get(name=extension.name), None


# --- the web catalog -----------------------------------------------------------------------------


def recent_versions(*, limit: int = 10) -> list[Version]:
    """The most recently published versions (yanked ones included), newest first, with their
    extensions loaded."""
    return list(
        Version.objects.select_related("extension")
        .defer(*VERSION_LARGE_FIELDS, *(f"extension__{field}" for field in EXTENSION_LARGE_FIELDS))
        .order_by("-published_at", "-id")[:limit]
    )


def downloads_per_day(*, extension: Extension, version: Version | None, start: date) -> dict[date, int]:
    """Downloads per day (UTC) since ``start`` of an extension, or of one of its versions (the
    daily counts `registry.downloadcounts` writes): one grouped query, at most one row a day."""
    rows = DailyDownloads.objects.filter(day__gte=start)
    rows = rows.filter(version=version) if version is not None else rows.filter(version__extension=extension)
    return dict(rows.order_by().values("day").annotate(n=Sum("count")).values_list("day", "n"))


def downloads_per_version(*, extension: Extension, windows: dict[str, date]) -> dict[int, dict[str, int]]:
    """For each version of the extension with downloads since the earliest window's start, its
    downloads in each window (``{"90": start, "7": start}`` -> ``{version id: {"90": n, "7": n}}``):
    one grouped query."""
    earliest = min(windows.values())
    sums = {label: Coalesce(Sum("count", filter=Q(day__gte=start)), 0) for label, start in windows.items()}
    rows = (
        DailyDownloads.objects.filter(version__extension=extension, day__gte=earliest)
        .order_by()
        .values("version_id")
        .annotate(**{f"w{label}": value for label, value in sums.items()})
    )
    return {row["version_id"]: {label: int(row[f"w{label}"]) for label in windows} for row in rows}


def most_downloaded(*, limit: int = 8) -> list[Extension]:
    return [e for e, _ in extension_search(sort="downloads", limit=limit, counted=False).items if e.downloads > 0]


def recently_updated(*, limit: int = 8) -> list[Extension]:
    """The extensions whose latest version was published most recently (listing fields only)."""
    page = extension_search(sort="updated", limit=limit, counted=False)
    return [e for e, _ in page.items if e.latest_version is not None]


def package_signed(version: Version) -> bool:
    """Whether the signed index (registry.trust) covers this version's package with its digest."""
    path = f"packages/{version.extension.name}/{version.extension.name}-{version.version}.tar.gz"
    return TrustTarget.objects.filter(path=path, sha256=version.sha256, length=version.size).exists()


def version_dependencies(version: Version) -> list[Dependency]:
    """The extension dependencies of a version, by name (sorted here, by code point, whatever the
    database's collation), with the depended-on extensions loaded (those `version_get`
    prefetched, when it did)."""
    if "dependencies" in getattr(version, "_prefetched_objects_cache", {}):
        rows = list(version.dependencies.all())
    else:
        rows = list(Dependency.objects.filter(version=version).select_related("extension"))
    return sorted(rows, key=lambda d: d.extension.name)


def version_provides(version: Version | None) -> dict[str, list[str]]:
    """What a version provides, by plural kind (every kind present, names sorted)."""
    provides: dict[str, list[str]] = {PLURAL[t]: [] for t in TYPES}
    if version is not None:
        for row in sorted(version.provides.all(), key=lambda p: (p.kind, p.name)):
            provides[PLURAL[row.kind]].append(row.name)
    return provides


def extension_owners(extension: Extension) -> list[str]:
    """The usernames of the owners, sorted (uses the ownerships `extension_get` prefetched)."""
    return sorted(o.user.get_username() for o in extension.ownerships.all())


def catalog_fingerprint() -> str:
    """A value that changes whenever anything the catalog's listings show changes (a publish, a
    yank, a download), read in one aggregate query: part of `catalog_state`."""
    row = Extension.objects.aggregate(n=Count("id"), updated=Max("updated_at"), downloads=Sum("downloads"))
    updated = row["updated"].isoformat() if row["updated"] is not None else "-"
    return f"{row['n']}:{updated}:{row['downloads'] or 0}"


def catalog_state() -> str:
    """The catalog's state for what is kept of it (`catalog_cached`, the search facets, the home
    and search pages' ETags): its fingerprint and the generation `catalog_changed` sets after every
    commit that changes it (a commit can land after a later-stamped one, which the fingerprint
    alone would miss). Read it before computing what is kept, so that a value is never older than
    its state. Within one web request it is read once (the page's ETag and what the page reads
    share it, registry.thisrequest), and anew after `catalog_changed`."""
    return thisrequest.remembered(
        "catalog_state", lambda: f"{catalog_fingerprint()}|{cache.get(CATALOG_GENERATION_KEY, '')}"
    )


def catalog_cached(name: str, compute: Callable[[], T]) -> T:
    """``compute()`` as of the catalog's current state (`catalog_state`), kept in the shared cache
    (one entry per name, with the state it was computed at) for aggregates over the whole
    catalog. An entry lives CATALOG_CACHE_SECONDS at most (a change made outside the services). The name takes
    no input from a request, so no request can fill the cache."""
    state = catalog_state()
    key = f"catalog:{name}"
    entry = cache.get(key)
    if isinstance(entry, tuple) and len(entry) == 2 and entry[0] == state:
        return cast(T, entry[1])
    value = compute()
    cache.set(key, (state, value), timeout=CATALOG_CACHE_SECONDS)
    return value


def catalog_changed() -> None:
    """A commit changed the catalog (a publish, a yank or unyank, a download flush): aggregates
    cached by `catalog_cached` and the search facets are read again. Called on commit."""
    cache.set(CATALOG_GENERATION_KEY, uuid.uuid4().hex, timeout=None)
    thisrequest.forget()  # the catalog's state and whatever this request read with it


def _per_extension(query: QuerySet[Any], field: str, aggregate: Any, *, outer: str = "pk") -> Subquery:
    """A scalar subquery: ``aggregate`` over the rows of ``query`` whose ``field`` is the outer
    extension's ``outer`` (its key; its name for the signed index's targets), grouped by that
    field, so it is one row or none."""
    return Subquery(query.filter(**{field: OuterRef(outer)}).order_by().values(field).annotate(v=aggregate).values("v"))


def extension_fingerprint(*, name: str) -> str | None:
    """A value that changes whenever the catalog pages of an extension or one of its versions
    would change: its row (publishes and yanks rewrite it), its downloads, its owners, the
    extensions that depend on it, and its targets in the signed index (which `trust init` signs
    without touching the row); None when there is no such extension. One query, for ETags. It
    ends with ``:`` and the latest version's canonical text (``None`` when every version is yanked)."""
    if not is_valid_name(name):
        return None
    row = (
        Extension.objects.filter(name=name)
        .annotate(
            owners_n=_per_extension(Ownership.objects.all(), "extension", Count("id")),
            owners_ids=_per_extension(Ownership.objects.all(), "extension", Sum("id")),
            dependents_n=_per_extension(Dependency.objects.all(), "extension", Count("id")),
            dependents_last=_per_extension(Dependency.objects.all(), "extension", Max("id")),
            dependents_updated=_per_extension(
                Dependency.objects.all(), "extension", Max("version__extension__updated_at")
            ),
            signed_n=_per_extension(TrustTarget.objects.all(), "extension", Count("path"), outer="name"),
        )
        .values_list(
            "pk",
            "updated_at",
            "downloads",
            "owners_n",
            "owners_ids",
            "dependents_n",
            "dependents_last",
            "dependents_updated",
            "signed_n",
            "latest_version__canonical",
        )
        .first()
    )
    if row is None:
        return None
    return ":".join(v.isoformat() if hasattr(v, "isoformat") else str(v) for v in row)


# --- metrics --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CatalogStats:
    extensions: int
    extensions_by_type: dict[str, int]
    versions: int
    yanked_versions: int
    downloads: int


def catalog_stats() -> CatalogStats:
    """Aggregates for /metrics and the home page, read from the database (correct across
    processes) once per state of the catalog (`catalog_cached`): they scan every version."""
    return catalog_cached("stats", _catalog_stats)


def _catalog_stats() -> CatalogStats:
    by_type: dict[str, int] = dict.fromkeys(TYPES, 0)
    for row in Extension.objects.values("type").annotate(n=Count("id")).order_by():
        by_type[row["type"]] = row["n"]
    versions = Version.objects.aggregate(
        total=Count("id"),
        yanked=Count("id", filter=Q(yanked=True)),
        downloads=Coalesce(Sum("downloads"), 0),
    )
    return CatalogStats(
        extensions=sum(by_type.values()),
        extensions_by_type=by_type,
        versions=int(versions["total"]),
        yanked_versions=int(versions["yanked"]),
        downloads=int(versions["downloads"]),
    )
