"""The catalog pages people browse to choose an extension (issue 14, read side): downloads over
time, the dependency graph picture, search that helps choose (facets, compatibility, orders, did
you mean), trust on the version page, 404s with suggestions, and query counts that do not grow
with the number of versions or dependencies."""

from __future__ import annotations

import html
import re
import urllib.parse
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from registry import depgraph, downloadcounts, services, views
from registry.kept import Kept
from registry.models import Extension, Version
from registry.tokens import Actor

if TYPE_CHECKING:
    from tests.factories import Publisher

pytest_plugins = ["tests.factories"]

HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture(autouse=True)
def fresh_graphs() -> None:
    depgraph.clear_cache()


def page(client: Client, url: str, status: int = 200) -> str:
    response = client.get(url)
    assert response.status_code == status, (url, response.status_code, response.content[:800])
    return response.content.decode("utf-8")


def section(text: str, ident: str) -> str:
    return text.split(f'id="{ident}"', 1)[1].split("</section>", 1)[0]


def result_names(text: str) -> list[str]:
    return re.findall(r'<h2><a href="/extensions/([a-z0-9-]+)/">', text)


def downloads(name: str, version: str, *days_and_counts: tuple[int, int]) -> None:
    """Daily counts as `registry.downloadcounts` writes them: (days ago, count) pairs."""
    pk = Version.objects.get(extension__name=name, canonical=version).pk
    today = datetime.now(UTC).date()
    downloadcounts.write(Counter({(pk, (today - timedelta(days=ago)).isoformat()): n for ago, n in days_and_counts}))


def yank(user: AbstractBaseUser, name: str, version: str) -> None:
    services.version_yank(actor=Actor(user=user), name=name, version=version, reason="broken")


@pytest.fixture
def catalog(publisher: Publisher) -> None:
    publisher("etcd", "3.5.9", keywords=("kv", "consensus"), categories=("databases",))
    publisher("etcd", "3.5.12", keywords=("kv", "consensus"), categories=("databases",))
    publisher("containerd", "1.7.0", keywords=("containers",), categories=("runtimes",))
    publisher(
        "kubernetes",
        "1.28.0",
        dependencies=["etcd ^3.5", "containerd ^1.7"],
        keywords=("containers", "orchestration"),
        categories=("orchestration",),
        description="Kubernetes container orchestrator",
    )
    publisher("aws", "2.0.0", type="provider", keywords=("cloud",), provisioning_version=">=2.0.0")


# --- downloads over time ---------------------------------------------------------------------------


def test_the_extension_page_charts_90_days_of_downloads_with_the_numbers_and_each_version(
    client: Client, catalog: None
) -> None:
    downloads("etcd", "3.5.12", (0, 3), (1, 5), (40, 7))
    downloads("etcd", "3.5.9", (1, 2), (120, 100))  # 120 days ago: outside the chart
    text = section(page(client, "/extensions/etcd/"), "downloads")
    assert 'last 90 days <span class="count">17</span>' in text
    svg = text.split("<svg", 1)[1].split("</svg>", 1)[0]
    assert 'role="img" aria-labelledby="downloads-chart-title downloads-chart-desc"' in svg
    assert "Downloads of etcd per day, last 90 days" in svg
    today = datetime.now(UTC).date()
    day = (today - timedelta(days=1)).isoformat()
    assert f"<title>{day}: 7 downloads</title>" in svg  # 5 + 2 on the same day
    assert svg.count('class="chart-bar"') == 3
    # The numbers as a table, newest first, only the days with downloads.
    rows = re.findall(r'<time datetime="([0-9-]+)">[0-9-]+</time></td><td class="num">(\d+)</td>', text)
    assert rows == [(today.isoformat(), "3"), (day, "7"), ((today - timedelta(days=40)).isoformat(), "7")]
    # Per version: last 90, 30, 7 days, in all.
    table = text.split('class="table compact per-version"')[1]
    cells = re.findall(r'<a class="v" href="[^"]+">([0-9.]+)</a></td>((?:<td class="num">\d+</td>)+)', table)
    assert [(v, re.findall(r"\d+", c)) for v, c in cells] == [
        ("3.5.12", ["15", "8", "8", "15"]),
        ("3.5.9", ["2", "2", "2", "102"]),
    ]


def test_the_version_page_charts_that_version_only(client: Client, catalog: None) -> None:
    downloads("etcd", "3.5.12", (0, 3))
    downloads("etcd", "3.5.9", (0, 4))
    text = section(page(client, "/extensions/etcd/3.5.9/"), "downloads")
    assert "Downloads of 3.5.9, last 90 days" in text and 'class="count">4</span>' in text
    assert "Downloads of etcd 3.5.9 per day" in text
    assert "per-version" not in text


def test_a_page_without_downloads_says_so(client: Client, catalog: None) -> None:
    text = section(page(client, "/extensions/aws/"), "downloads")
    assert "No downloads in the last 90 days." in text
    assert 'class="chart-bar"' not in text


def test_the_home_page_lists_the_most_downloaded_and_the_recently_updated(client: Client, catalog: None) -> None:
    downloads("containerd", "1.7.0", (0, 50))
    downloads("etcd", "3.5.12", (0, 9))
    text = page(client, "/")
    popular = text.split('id="popular-title"')[1].split("</section>")[0]
    assert re.findall(r'<li><a href="/extensions/([a-z-]+)/">', popular) == ["containerd", "etcd"]
    assert "50 downloads" in popular and '<a href="/search?sort=downloads">' in popular
    updated = text.split('id="updated-title"')[1].split("</section>")[0]
    assert re.findall(r'<li><a href="/extensions/([a-z-]+)/">', updated) == [
        "aws",
        "kubernetes",
        "containerd",
        "etcd",
    ]
    assert '<a class="v" href="/extensions/etcd/3.5.12/">3.5.12</a>' in updated


# --- the dependency graph ----------------------------------------------------------------------------


def test_the_graph_shows_what_would_be_installed_each_node_linking_to_its_page(client: Client, catalog: None) -> None:
    text = section(page(client, "/extensions/kubernetes/"), "graph")
    assert "Dependency graph of 1.28.0" in text
    svg = text.split("<svg", 1)[1].split("</svg>", 1)[0]
    links = re.findall(r'<a class="graph-node graph-node-(\w+)[^"]*" href="([^"]+)"><title>([^<]+)</title>', svg)
    assert sorted(links) == [
        ("ok", "/extensions/containerd/1.7.0/", "containerd 1.7.0"),
        ("ok", "/extensions/etcd/3.5.12/", "etcd 3.5.12"),
        ("root", "/extensions/kubernetes/1.28.0/", "kubernetes 1.28.0 (the version shown)"),
    ]
    assert "<title>kubernetes requires etcd ^3.5</title>" in svg
    # The same as text: the install order, dependencies first (as POST /api/v1/resolve answers).
    order = re.findall(r'<li class="step-\w+"><a href="[^"]+">([a-z-]+) ', text)
    resolved = client.post("/api/v1/resolve", {"requirements": ["kubernetes =1.28.0"]}, content_type="application/json")
    assert order == resolved.json()["data"]["install_order"] == ["containerd", "etcd", "kubernetes"]
    # No script and no style in the picture (the page's CSP allows neither inline).
    assert "<script" not in svg and "style=" not in svg


def test_a_version_that_cannot_be_installed_shows_the_conflict_in_the_picture(
    client: Client, publisher: Publisher
) -> None:
    publisher("libfoo", "1.0.0")
    publisher("libfoo", "2.0.0")
    publisher("old-user", "1.0.0", dependencies=["libfoo ^1"])
    publisher("app", "1.0.0", dependencies=["libfoo ^2", "old-user"])
    text = section(page(client, "/extensions/app/1.0.0/"), "graph")
    assert "This version cannot be installed as it is:</strong> cannot resolve app =1.0.0" in text
    svg = text.split("<svg", 1)[1].split("</svg>", 1)[0]
    assert re.search(r'class="graph-node graph-node-conflict[^"]*" href="/extensions/libfoo/2.0.0/"', svg)
    assert "<title>old-user requires libfoo ^1: no version matches</title>" in svg
    assert 'class="graph-edge graph-edge-broken"' in svg
    assert "(unsatisfied)" in text  # said in words too, beside the picture


def test_a_dependency_with_only_yanked_versions_is_drawn_as_missing(
    client: Client, publisher: Publisher, user: AbstractBaseUser
) -> None:
    publisher("gone", "1.0.0")
    publisher("needs-gone", "1.0.0", dependencies=["gone ^1"])
    yank(user, "gone", "1.0.0")
    text = section(page(client, "/extensions/needs-gone/"), "graph")
    assert re.search(r'class="graph-node graph-node-missing" href="/extensions/gone/"><title>gone no version', text)
    assert '<span class="badge status-failed">no version matches</span>' in text


def test_the_graph_follows_a_publish_of_a_dependency_and_the_page_etag_changes(
    client: Client, publisher: Publisher
) -> None:
    publisher("base", "1.0.0")
    publisher("top", "1.0.0", dependencies=["base ^1"])
    first = client.get("/extensions/top/1.0.0/")
    assert 'href="/extensions/base/1.0.0/"' in first.content.decode()
    assert client.get("/extensions/top/1.0.0/", HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304
    publisher("base", "1.1.0")  # nothing about top changed, but what it installs did
    second = client.get("/extensions/top/1.0.0/", HTTP_IF_NONE_MATCH=first["ETag"])
    assert second.status_code == 200
    assert 'href="/extensions/base/1.1.0/"' in second.content.decode()


def test_names_in_the_graph_and_the_charts_are_escaped(client: Client, publisher: Publisher) -> None:
    publisher("evil", "1.0.0", description=HOSTILE)
    publisher("uses-evil", "1.0.0", dependencies=["evil >=1.0"], description=HOSTILE)
    for url in ("/extensions/uses-evil/", "/extensions/uses-evil/1.0.0/"):
        text = page(client, url)
        assert HOSTILE not in text
        assert re.findall(r"<script[^>]*>", text) == ['<script src="/static/registry/catalog.js" defer>']
        assert " style=" not in text


# --- trust ----------------------------------------------------------------------------------------------


def test_the_version_page_shows_checksum_reproducibility_and_the_signed_index(
    client: Client, publisher: Publisher, settings: Any, private_storage: Path, tmp_path: Path
) -> None:
    from registry.trust import repository

    publisher("etcd", "3.5.12")
    text = section(page(client, "/extensions/etcd/3.5.12/"), "trust")
    sha = Version.objects.get(canonical="3.5.12").sha256
    assert f'<dd><code class="digest">{sha}</code></dd>' in text
    assert '<span class="badge badge-yanked">not covered</span>' in text  # no signed index here yet
    assert "no provenance statement for this version" in text
    Version.objects.update(reproducible=True, reproducible_note="rebuilt: byte-identical")
    settings.REGISTRY_TUF_KEYS_DIR = tmp_path / "keys"
    with transaction.atomic():
        repository.init(root_key_dir=tmp_path / "root", bit_length=4)
    text = section(page(client, "/extensions/etcd/3.5.12/"), "trust")
    assert '<span class="badge badge-ok">covered</span>' in text
    assert '<span class="badge badge-ok">yes</span> <span class="muted">rebuilt: byte-identical</span>' in text
    Version.objects.update(reproducible=False, reproducible_note="")
    views.forget_pages()  # (a row changed by hand, which nothing announces: kept pages last KEPT_PAGE_SECONDS)
    assert '<span class="badge status-failed">no</span>' in section(page(client, "/extensions/etcd/3.5.12/"), "trust")


def test_the_provenance_summary_is_rendered_escaped_when_the_hook_gives_one(
    client: Client, publisher: Publisher, monkeypatch: pytest.MonkeyPatch
) -> None:
    publisher("etcd", "3.5.12")
    seen: list[Version] = []

    def provenance(version: Version) -> dict[str, Any]:
        seen.append(version)
        return {
            "builder": "https://registry.example/builder",
            "source_digest": "sha256:" + "ab" * 32,
            "source_kind": "source archive",
            "signed_by": HOSTILE,
            "statement_url": "/api/v1/extensions/etcd/versions/3.5.12/provenance",
        }

    monkeypatch.setattr(views, "version_provenance", provenance)
    text = section(page(client, "/extensions/etcd/3.5.12/"), "trust")
    assert [v.canonical for v in seen] == ["3.5.12"]
    assert "Built by <code>https://registry.example/builder</code>" in text
    assert f'From source archive <code class="digest">sha256:{"ab" * 32}</code>' in text
    assert html.escape(HOSTILE) in text and HOSTILE not in text
    assert '<a href="/api/v1/extensions/etcd/versions/3.5.12/provenance">' in text


# --- search that helps choose -------------------------------------------------------------------------


def facet_counts(text: str, ident: str) -> dict[str, int]:
    block = text.split(f'id="{ident}"', 1)[1].split("</nav>", 1)[0]
    return {k: int(n) for k, n in re.findall(r'>([^<>]+)</a> <span class="facet-count">(\d+)</span>', block)}


def test_search_counts_each_facet_with_the_other_filters(client: Client, catalog: None) -> None:
    text = page(client, "/search")
    types = re.findall(r'>(\w+) <span class="facet-count">(\d+)</span></a>', text.split('class="facets"')[1])
    assert dict(types) == {"Providers": "1", "Taskservs": "3", "Clusters": "0", "Templates": "0"}
    assert facet_counts(text, "keywords-title") == {
        "containers": 2,
        "cloud": 1,
        "consensus": 1,
        "kv": 1,
        "orchestration": 1,
    }
    assert facet_counts(text, "categories-title") == {"databases": 1, "orchestration": 1, "runtimes": 1}
    # A keyword chosen: the types count with it, the keywords without it (to switch to another).
    chosen = page(client, "/search?keyword=containers")
    assert result_names(chosen) == ["containerd", "kubernetes"]
    assert 'Taskservs <span class="facet-count">2</span>' in chosen
    assert 'Providers <span class="facet-count">0</span>' in chosen
    assert facet_counts(chosen, "keywords-title")["cloud"] == 1
    assert facet_counts(chosen, "categories-title") == {"orchestration": 1, "runtimes": 1}
    assert result_names(page(client, "/search?category=runtimes")) == ["containerd"]
    assert 'href="/search?keyword=containers&amp;category=runtimes"' in chosen


def test_a_searchs_facets_are_counted_once_per_state_of_the_catalog_and_follow_every_change(
    client: Client, catalog: None, user: AbstractBaseUser, publisher: Publisher, monkeypatch: pytest.MonkeyPatch
) -> None:
    from registry import selectors

    counted: list[tuple[Any, ...]] = []  # the filters of each count
    facets = selectors._facets
    monkeypatch.setattr(selectors, "_facets", lambda base, *filters: counted.append(filters) or facets(base, *filters))
    for sort in ("relevance", "name", "downloads"):  # three pages of one search
        assert facet_counts(page(client, f"/search?q=etcd&sort={sort}"), "keywords-title") == {"consensus": 1, "kv": 1}
    assert len(counted) == 1  # the first request counted; the others used its counts
    publisher("etcd-operator", "1.0.0", keywords=("kv", "operators"))
    assert facet_counts(page(client, "/search?q=etcd"), "keywords-title") == {"consensus": 1, "kv": 2, "operators": 1}
    yank(user, "etcd-operator", "1.0.0")  # still listed, still counted (why it cannot be installed is shown)
    page(client, "/search?q=etcd")
    assert len(counted) == 3  # each change of the catalog counted again
    # Each process keeps the last FACET_CACHE_ENTRIES searches, however many different ones it is asked.
    monkeypatch.setattr(selectors, "_facet_cache", Kept(4))
    for word in ("a", "b", "c", "d", "e", "f"):
        page(client, f"/search?q={word}")
    assert len(selectors._facet_cache) == 4
    views.forget_pages()  # (the pages themselves are kept too: render them again)
    page(client, "/search?q=a")  # pushed out by the later ones: counted again
    page(client, "/search?q=f")  # still kept
    assert len(counted) == 3 + 6 + 1


def test_an_anonymous_page_is_rendered_once_per_state_and_a_personal_one_never_kept(
    client: Client, catalog: None, user: AbstractBaseUser, publisher: Publisher
) -> None:
    for url in ("/", "/search?q=etcd", "/extensions/etcd/", "/extensions/etcd/3.5.12/"):
        first = client.get(url)
        with CaptureQueriesContext(connection) as queries:
            again = client.get(url)
        assert again.content == first.content and again["ETag"] == first["ETag"]
        assert again["Content-Type"] == first["Content-Type"]
        assert len(queries) <= 2, (url, [q["sql"] for q in queries])  # the ETag's state, nothing rendered
    # Any change of what a page shows is a new state: rendered again.
    publisher("etcd", "3.6.0", keywords=("kv", "consensus"), categories=("databases",))
    assert "3.6.0" in page(client, "/extensions/etcd/") and "3.6.0" in page(client, "/")
    assert "This version is yanked" not in page(client, "/extensions/etcd/3.6.0/")
    yank(user, "etcd", "3.6.0")
    assert "This version is yanked" in page(client, "/extensions/etcd/3.6.0/")
    # A logged-in owner's page (their name, their controls) is never kept, nor served to anyone else.
    client.force_login(user)
    personal = page(client, "/extensions/etcd/")
    assert 'id="owner-controls"' in personal and 'class="account-user"' in personal
    client.logout()
    for _ in range(2):
        anonymous = page(client, "/extensions/etcd/")
        assert 'id="owner-controls"' not in anonymous and 'class="account-user"' not in anonymous


def test_a_rendered_page_reads_the_catalogs_state_once(client: Client, catalog: None, publisher: Publisher) -> None:
    """The ETag and what the page keeps (the home page's counts, the runtime filter's constraints,
    the facets) share one read of the catalog's fingerprint; a change within the request is seen."""

    def fingerprints(url: str) -> int:
        views.forget_pages()
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        return sum('SUM("registry_extension"."downloads")' in q["sql"] for q in queries)

    for url in ("/", "/search?q=etcd&runtime=1.4.0"):
        assert fingerprints(url) == 1, url
        publisher("redis", "7.2.0" if url == "/" else "7.2.1")  # a new state: read once again
        assert fingerprints(url) == 1, url
    assert "redis" in page(client, "/") and "redis" in page(client, "/search?q=redis&runtime=1.4.0")


def test_a_rendered_page_checks_its_dependency_graph_once(client: Client, catalog: None) -> None:
    """The ETag and the picture share one check of the graph's documents (registry.thisrequest),
    and the next request checks again."""
    client.get("/extensions/kubernetes/1.28.0/")  # the graph computed and kept by the process
    for url in ("/extensions/kubernetes/", "/extensions/kubernetes/1.28.0/"):
        for _ in range(2):
            views.forget_pages()
            with CaptureQueriesContext(connection) as queries:
                assert "Dependency graph of 1.28.0" in client.get(url).content.decode()
            checks = [q for q in queries if '"index_etag" FROM "registry_extension" WHERE' in q["sql"]]
            assert len(checks) == 1, url


def test_search_filters_by_runtime_compatibility(client: Client, catalog: None) -> None:
    assert result_names(page(client, "/search?runtime=1.4.0")) == ["containerd", "etcd", "kubernetes"]
    assert result_names(page(client, "/search?runtime=2.1.0")) == ["aws", "containerd", "etcd", "kubernetes"]
    text = page(client, "/search?runtime=1.4.0&q=aws")
    assert "No extensions found" in text and "with these filters" in text
    api = client.get("/api/v1/extensions/", {"runtime_version": "1.4.0"}).json()["data"]
    assert [item["name"] for item in api["items"]] == ["containerd", "etcd", "kubernetes"]


def test_recently_updated_follows_publishes_yanks_and_unyanks(
    client: Client, catalog: None, user: AbstractBaseUser, publisher: Publisher
) -> None:
    assert result_names(page(client, "/search?sort=updated")) == ["aws", "kubernetes", "containerd", "etcd"]
    publisher("etcd", "3.6.0", keywords=("kv", "consensus"), categories=("databases",))
    assert result_names(page(client, "/search?sort=updated")) == ["etcd", "aws", "kubernetes", "containerd"]
    etcd = Extension.objects.get(name="etcd")
    assert etcd.latest_published_at == Version.objects.get(extension=etcd, canonical="3.6.0").published_at
    yank(user, "etcd", "3.6.0")  # back to 3.5.12's time
    assert result_names(page(client, "/search?sort=updated")) == ["aws", "kubernetes", "containerd", "etcd"]
    for version in ("3.5.9", "3.5.12"):
        yank(user, "etcd", version)
    assert Extension.objects.get(name="etcd").latest_published_at is None  # nothing to install: last
    assert result_names(page(client, "/search?sort=updated")) == ["aws", "kubernetes", "containerd", "etcd"]
    services.version_unyank(actor=Actor(user=user), name="etcd", version="3.6.0")
    assert result_names(page(client, "/search?sort=updated"))[0] == "etcd"


def test_the_catalogs_aggregates_follow_every_change(
    client: Client, catalog: None, user: AbstractBaseUser, publisher: Publisher
) -> None:
    """The counts (home page, /metrics) and the runtime filter's constraints are read once per
    state of the catalog: each publish, yank and download flush is seen by the next request."""

    def stats() -> tuple[str, ...]:
        hero = page(client, "/").split('class="stats"', 1)[1].split("</ul>", 1)[0]
        return tuple(re.findall(r"<strong>(\d+)</strong>", hero))

    assert stats() == ("4", "5", "0")
    assert result_names(page(client, "/search?runtime=3.0.0")) == ["aws", "containerd", "etcd", "kubernetes"]
    publisher("redis", "7.2.0", provisioning_version=">=3.0.0")
    assert stats() == ("5", "6", "0")
    assert "redis" in result_names(page(client, "/search?runtime=3.0.0"))
    yank(user, "redis", "7.2.0")
    assert "redis" not in result_names(page(client, "/search?runtime=3.0.0"))
    downloads("etcd", "3.5.12", (0, 3))
    assert stats() == ("5", "6", "3")
    metrics = client.get("/metrics").content.decode()
    assert "registry_versions_yanked 1.0" in metrics and "registry_downloads_total 3.0" in metrics


def test_a_commit_the_fingerprint_misses_is_announced_by_catalog_changed(client: Client, catalog: None) -> None:
    """On PostgreSQL a yank can commit after a later-stamped publish of another extension: the
    fingerprint (count, last update, downloads) does not move, the generation does."""
    from registry import selectors

    assert selectors.catalog_stats().yanked_versions == 0
    etags = {url: client.get(url)["ETag"] for url in ("/", "/search?q=etcd")}
    Version.objects.filter(extension__name="etcd", canonical="3.5.9").update(yanked=True)  # no refresh
    assert selectors.catalog_stats().yanked_versions == 0  # one read per state: the cached one
    assert {url: client.get(url)["ETag"] for url in etags} == etags
    selectors.catalog_changed()
    assert selectors.catalog_stats().yanked_versions == 1
    assert all(client.get(url)["ETag"] != etag for url, etag in etags.items())  # pages are read again too


def test_search_sorts_by_relevance_downloads_update_and_name(client: Client, catalog: None) -> None:
    downloads("etcd", "3.5.12", (0, 5))
    downloads("containerd", "1.7.0", (0, 2))
    assert result_names(page(client, "/search?sort=downloads")) == ["etcd", "containerd", "aws", "kubernetes"]
    assert result_names(page(client, "/search?sort=updated")) == ["aws", "kubernetes", "containerd", "etcd"]
    assert result_names(page(client, "/search?sort=name&q=con")) == ["containerd", "etcd", "kubernetes"]
    assert result_names(page(client, "/search?q=contain")) == ["containerd", "kubernetes"]  # relevance
    for sort in ("downloads", "updated", "name"):
        api = client.get("/api/v1/extensions/", {"sort": sort}).json()["data"]["items"]
        assert [item["name"] for item in api] == result_names(page(client, f"/search?sort={sort}"))
    # Every word must match: the words need not be next to each other.
    assert result_names(page(client, "/search?q=kubernetes+orchestrator")) == ["kubernetes"]


def test_a_search_without_results_suggests_a_close_name(client: Client, catalog: None) -> None:
    text = page(client, "/search?q=kubernets&type=taskserv")
    assert "No extensions found" in text
    assert 'Did you mean <a href="/search?q=kubernetes&amp;type=taskserv">kubernetes</a>?' in text


@pytest.mark.parametrize(
    ("query", "notice"),
    [
        ({"sort": "bogus"}, "Unknown order &#x27;bogus&#x27; ignored: use one of relevance, downloads"),
        ({"runtime": "one"}, "&#x27;one&#x27; is not a runtime version (use MAJOR.MINOR.PATCH"),
        ({"category": "c" * 500}, "A category has at most 64 characters: the filter was ignored."),
        ({"page": "-3"}, "Page numbers are whole numbers from 1: showing the first page."),
        ({"q": "x" * 10_000}, "The search was cut to its first 200 characters."),
    ],
)
def test_search_ignores_what_it_cannot_use_with_a_clear_notice(
    client: Client, catalog: None, query: dict[str, str], notice: str
) -> None:
    text = page(client, "/search?" + urllib.parse.urlencode(query))
    assert notice in text


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"sort": "bogus"}, "sort"),
        ({"runtime_version": "one"}, "runtime_version"),
        ({"category": "c" * 65}, "category"),
        ({"category": "a\x00b"}, "category"),
    ],
)
def test_the_api_refuses_a_bad_search_parameter_naming_it(
    client: Client, db: None, params: dict[str, str], parameter: str
) -> None:
    response = client.get("/api/v1/extensions/", params)
    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["path"] == parameter


def test_search_ranks_with_postgres_text_rank_or_the_sqlite_fallback_with_the_same_results(
    client: Client, publisher: Publisher
) -> None:
    # Both descriptions match both words; on PostgreSQL the one that says each word twice (in its
    # description and its keywords) ranks first; the fallback ranks by downloads.
    publisher("alpha", "1.0.0", description="backup tool for etcd", keywords=("etcd", "backup"))
    publisher("bravo", "1.0.0", description="backup for etcd clusters")
    downloads("bravo", "1.0.0", (0, 1))
    names = result_names(page(client, "/search?q=etcd+backup"))
    assert sorted(names) == ["alpha", "bravo"]
    assert names == (["alpha", "bravo"] if connection.vendor == "postgresql" else ["bravo", "alpha"])


# --- 404s with suggestions ---------------------------------------------------------------------------


def test_a_missing_version_links_the_versions_there_are(client: Client, catalog: None) -> None:
    text = page(client, "/extensions/etcd/9.9.9/", status=404)
    assert (
        'Versions there are: <a href="/extensions/etcd/3.5.12/">etcd 3.5.12</a>, '
        '<a href="/extensions/etcd/3.5.9/">etcd 3.5.9</a>.' in text
    )


def test_an_unknown_page_suggests_a_close_name_and_a_search(client: Client, catalog: None) -> None:
    text = page(client, "/taskservs/kubernets", status=404)
    assert 'Did you mean <a href="/extensions/kubernetes/">kubernetes</a>?' in text
    assert '<a href="/search?q=kubernets">Search the catalog for “kubernets”</a>' in text


# --- query counts ------------------------------------------------------------------------------------


def queries(client: Client, url: str) -> int:
    client.get(url)  # warm: the process caches parsed index documents and graphs (and ETags)
    views.forget_pages()  # rendered again, not the page the process kept
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(captured)


def test_query_counts_do_not_grow_with_versions_or_dependencies(
    client: Client, publisher: Publisher, django_assert_max_num_queries: Any
) -> None:
    for name in ("d1", "d2", "d3", "d4", "d5"):
        publisher(name, "1.0.0", keywords=("dep",), categories=("deps",))
    publisher("small", "1.0.0", dependencies=["d1"])
    publisher("big", "1.0.0", dependencies=["d1", "d2", "d3"])
    for version in ("1.0.1", "1.0.2", "1.1.0", "2.0.0"):
        publisher("big", version, dependencies=["d1", "d2", "d3", "d4", "d5"])
    downloads("big", "2.0.0", (0, 3), (5, 2))
    downloads("big", "1.0.0", (1, 1))
    pairs = [
        ("/extensions/small/", "/extensions/big/"),
        ("/extensions/small/1.0.0/", "/extensions/big/2.0.0/"),
    ]
    for small, big in pairs:
        assert queries(client, small) == queries(client, big), (small, big)
    limits = {"/": 10, "/search?q=d": 5, "/search?keyword=dep&runtime=1.2.0&sort=downloads": 6}
    # (the provenance card, merged since, reads its statement: one query on each page)
    limits |= {"/extensions/big/": 12, "/extensions/big/2.0.0/": 14}
    for url, limit in limits.items():
        client.get(url)
        views.forget_pages()  # rendered again, with the per-process caches warm
        with django_assert_max_num_queries(limit):
            assert client.get(url).status_code == 200
    # A cold graph reads each document once, then the per-process caches take over.
    depgraph.clear_cache()
    with CaptureQueriesContext(connection) as cold:
        client.get("/extensions/big/2.0.0/")
    assert len(cold) <= limits["/extensions/big/2.0.0/"] + 3 + 6
    assert Extension.objects.count() == 7
