"""The web catalog (server-rendered HTML): the home page, search, an extension, a version, a build,
and the HTML 404s; what authors wrote is escaped everywhere (the sanitized README aside), every
page carries the strict Content-Security-Policy and answers conditional requests, and no path or
query string gets a 500."""

from __future__ import annotations

import html
import re
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.template.defaultfilters import floatformat
from django.test import Client, RequestFactory
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from registry import downloadcounts, services, views
from registry.tokens import Actor

if TYPE_CHECKING:
    from tests.factories import Publisher

pytest_plugins = ["tests.factories"]  # the user, token and publisher fixtures

HOSTILE = "<img src=x onerror=alert(1)>"
ESCAPED = html.escape(HOSTILE)  # &lt;img src=x onerror=alert(1)&gt;
HTML = "text/html; charset=utf-8"


def page(client: Client, url: str, status: int = 200) -> str:
    response = client.get(url)
    assert response.status_code == status, (url, response.status_code, response.content[:500])
    assert response["Content-Type"] == HTML
    return response.content.decode("utf-8")


def result_names(text: str) -> list[str]:
    """The extension names of a search results page, in order."""
    return re.findall(r'<h2><a href="/extensions/([a-z0-9-]+)/">', text)


def yank(user: AbstractBaseUser, name: str, version: str, reason: str) -> None:
    services.version_yank(actor=Actor(user=user), name=name, version=version, reason=reason)


def failed_build(client: Client, token: str, path: Path) -> str:
    """Publish a package the pipeline refuses; the id of its build."""
    from tests.factories import publish

    response = publish(client, token, path)
    assert response.status_code == 202, response.content
    build = response.json()["data"]
    assert build["status"] == "failed", build
    return str(build["id"])


@pytest.fixture
def catalog(publisher: Publisher, user: AbstractBaseUser) -> dict[str, Any]:
    """etcd 3.5.9 (yanked), 3.5.12; kubernetes 1.28.0 depending on etcd; a provider and a cluster."""
    publisher("etcd", "3.5.9", keywords=("kv", "consensus"), description="Distributed key-value store")
    etcd = publisher(
        "etcd",
        "3.5.12",
        keywords=("kv", "consensus"),
        description="Distributed key-value store",
        readme="# etcd\n\nA **reliable** store.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
        extra_files={"kcl/etcd.k": "schema Etcd:\n    name: str\n"},
    )
    yank(user, "etcd", "3.5.9", "data loss on restart")
    kubernetes = publisher("kubernetes", "1.28.0", dependencies=["etcd ^3.5"], keywords=("containers",))
    publisher("aws", "2.0.0", type="provider", description="Amazon Web Services provider")
    publisher("k8s-ha", "1.0.0", type="cluster", dependencies=["kubernetes >=1.28"], description="An HA cluster")
    return {"etcd": etcd, "kubernetes": kubernetes}


# --- home -----------------------------------------------------------------------------------------


def test_the_home_page_has_a_search_box_counts_recent_versions_and_kinds(client: Client, catalog: Any) -> None:
    text = page(client, "/")
    assert '<form class="hero-search" role="search" action="/search" method="get">' in text
    assert '<label for="q">' in text and 'id="q" type="search" name="q"' in text
    assert "<strong>4</strong> extensions" in text
    assert "<strong>5</strong> versions" in text
    # Browse by kind, with counts and links to the filtered search.
    kinds = (("provider", "Providers", 1), ("taskserv", "Taskservs", 2), ("cluster", "Clusters", 1))
    for kind, title, count in (*kinds, ("template", "Templates", 0)):  # templates too, none published
        assert f'<a href="/search?type={kind}">{title}</a> <span class="count"' in text
        assert f'aria-label="{count} extensions">{count}</span>' in text
    templates = text.split('class="card kind kind-template"')[1].split("</article>")[0]
    assert "None published yet." in templates
    # and in the navigation of every page
    nav = text.split('<nav class="site-nav"')[1].split("</nav>")[0]
    assert [title for _, title, _ in kinds] + ["Templates"] == re.findall(r'type=\w+">(\w+)</a>', nav)
    # Recently published, newest first; the yanked one marked.
    recent = text.split('id="recent-title"')[1]
    order = [recent.index(f'href="/extensions/{n}/{v}/"') for n, v in (("k8s-ha", "1.0.0"), ("aws", "2.0.0"))]
    assert order == sorted(order)
    assert re.search(r'href="/extensions/etcd/3.5.9/">3.5.9</a> <span class="badge badge-yanked">yanked', recent)


def test_the_home_page_of_an_empty_registry_says_nothing_is_published(client: Client, db: None) -> None:
    text = page(client, "/")
    assert "Nothing has been published yet." in text
    assert "<strong>0</strong> extensions" in text


# --- search ---------------------------------------------------------------------------------------


def test_search_ranks_results_as_the_api_does(client: Client, publisher: Publisher) -> None:
    publisher("watcher", "1.0.0", description="Watches etcd keys")
    publisher("kvstore", "1.0.0", keywords=("etcd",))
    publisher("my-etcd", "1.0.0")
    publisher("etcd-backup", "1.0.0")
    publisher("etcd", "3.5.9")
    publisher("unrelated", "1.0.0")
    names = result_names(page(client, "/search?q=etcd"))
    assert names == ["etcd", "etcd-backup", "my-etcd", "kvstore", "watcher"]
    api = client.get("/api/v1/extensions/", {"q": "etcd"}).json()["data"]["items"]
    assert [item["name"] for item in api] == names
    assert result_names(page(client, "/search?q=ETCD")) == names  # case-insensitive


def test_search_pages_through_the_results(
    client: Client, publisher: Publisher, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views, "PAGE_SIZE", 2)
    for name in ("alpha", "bravo", "charlie", "delta", "echo"):
        publisher(name, "1.0.0")
    first = page(client, "/search")
    assert result_names(first) == ["alpha", "bravo"]
    assert "1\u20132 of 5 extensions" in first
    assert '<a href="/search?page=2" rel="next">Next →</a>' in first
    assert 'rel="prev"' not in first
    second = page(client, "/search?page=2")
    assert result_names(second) == ["charlie", "delta"]
    assert '<a href="/search" rel="prev">' in second and '<a href="/search?page=3" rel="next">' in second
    third = page(client, "/search?page=3")
    assert result_names(third) == ["echo"]
    assert "5\u20135 of 5" in third and 'rel="next"' not in third
    beyond = page(client, "/search?page=9")
    assert result_names(beyond) == []
    assert "No results on page 9" in beyond and '<a href="/search">see the first page</a>' in beyond
    # The query and filters are kept from page to page.
    filtered = page(client, "/search?q=a&type=taskserv")
    assert 'href="/search?q=a&amp;type=taskserv&amp;page=2" rel="next"' in filtered


def test_search_filters_by_type_and_keyword(client: Client, catalog: Any) -> None:
    assert result_names(page(client, "/search?type=provider")) == ["aws"]
    assert result_names(page(client, "/search?type=clusters")) == ["k8s-ha"]  # the plural too
    assert result_names(page(client, "/search?keyword=kv")) == ["etcd"]
    text = page(client, "/search?type=taskserv")
    current = '<a href="/search?type=taskserv" aria-current="page" class="current">Taskservs'
    assert f'{current} <span class="facet-count">2</span></a>' in text


def test_search_without_results_says_so(client: Client, catalog: Any) -> None:
    text = page(client, "/search?q=nothing-like-this")
    assert "<h2>No extensions found</h2>" in text
    assert "Nothing matches “nothing-like-this”." in text
    assert result_names(text) == []


def test_search_drops_what_it_cannot_use_with_a_notice(client: Client, catalog: Any) -> None:
    text = page(client, "/search?type=bogus&keyword=NOT%20A%20KEYWORD!&page=abc")
    assert "Unknown type &#x27;bogus&#x27; ignored" in text
    assert "the filter was ignored" in text
    assert result_names(text) == ["aws", "etcd", "k8s-ha", "kubernetes"]
    long = page(client, "/search?" + urllib.parse.urlencode({"q": "e" * 300}))
    assert "cut to its first 200 characters" in long


# --- an extension ---------------------------------------------------------------------------------


def test_the_extension_page_shows_the_latest_version_and_everything_about_it(
    client: Client, catalog: Any, token: str
) -> None:
    client.get("/api/v1/extensions/etcd/versions/3.5.12/download")  # one download
    downloadcounts.flush()  # counts are written in batches, off the download path
    text = page(client, "/extensions/etcd/")
    assert '<h1>etcd <span class="version">3.5.12</span></h1>' in text
    assert '<span class="badge badge-taskserv">taskserv</span>' in text
    assert '<p class="lead description">Distributed key-value store</p>' in text
    assert "<dt>License</dt><dd>MIT</dd>" in text
    assert '<a href="https://example.com/etcd" rel="nofollow noopener">Repository</a>' in text
    assert '<a class="chip" href="/search?keyword=kv">kv</a>' in text
    assert '<ul class="plain owners"><li>alice</li></ul>' in text
    assert "<dd>1 in all</dd>" in text
    # The install commands, and the download with its checksum.
    assert "<pre><code>provisioning taskserv create etcd --infra DIR</code></pre>" in text
    assert "<pre><code>provisioning module load taskserv etcd</code></pre>" in text
    sha = client.get("/api/v1/extensions/etcd/versions/3.5.12/").json()["data"]["sha256"]
    assert f'<code class="digest">{sha}</code>' in text
    assert 'href="/api/v1/extensions/etcd/versions/3.5.12/download" download>etcd-3.5.12.tar.gz</a>' in text
    # The README, rendered (a table too).
    assert '<article class="readme"><h1>etcd</h1>\n<p>A <strong>reliable</strong> store.</p>' in text
    assert "<td>1</td>" in text
    # Dependents: kubernetes needs etcd.
    dependents = text.split('id="dependents-title"')[1]
    assert 'Dependents <span class="count">1</span>' in dependents
    assert '<a href="/extensions/kubernetes/">kubernetes</a>' in dependents
    assert '1.28.0 needs <code class="constraint" title="&gt;=3.5.0, &lt;4.0.0-0">^3.5</code>' in dependents


def test_the_versions_table_marks_yanked_versions_with_their_reason(client: Client, catalog: Any) -> None:
    text = page(client, "/extensions/etcd/")
    table = text.split('id="versions-title"')[1].split("</table>")[0]
    rows = re.findall(r"<tr class=\"([^\"]*)\"[^>]*>(.*?)</tr>", table, flags=re.S)
    assert [re.search(r">([0-9.]+)</a>", row).group(1) for _, row in rows] == ["3.5.12", "3.5.9"]  # type: ignore[union-attr]
    (latest_class, latest_row), (yanked_class, yanked_row) = rows
    assert "yanked" not in latest_class and '<span class="badge badge-latest">latest</span>' in latest_row
    assert "yanked" in yanked_class
    assert (
        '<span class="badge badge-yanked">yanked</span> <span class="yank-reason">data loss on restart</span>'
        in yanked_row
    )


def test_dependencies_of_the_latest_version_are_linked(client: Client, catalog: Any) -> None:
    text = page(client, "/extensions/kubernetes/")
    deps = text.split('id="dependencies-title"')[1].split("</section>")[0]
    assert "Dependencies of 1.28.0" in text
    assert (
        '<li><a href="/extensions/etcd/">etcd</a> '
        '<code class="constraint" title="&gt;=3.5.0, &lt;4.0.0-0">^3.5</code></li>' in deps
    )
    assert "Nothing depends on" not in text  # k8s-ha does
    assert "No extension dependencies." in page(client, "/extensions/aws/")


@pytest.mark.parametrize(
    ("name", "kind", "command"),
    [
        ("etcd", "taskserv", "provisioning taskserv create etcd --infra DIR"),
        ("k8s-ha", "cluster", "provisioning cluster create k8s-ha --infra DIR"),
        ("aws", "provider", "provisioning providers create aws --infra DIR"),
    ],
)
def test_the_install_command_fits_the_kind(client: Client, catalog: Any, name: str, kind: str, command: str) -> None:
    text = page(client, f"/extensions/{name}/")
    assert f"<pre><code>{command}</code></pre>" in text
    assert f'data-copy="{command}" hidden>Copy</button>' in text
    assert f"<pre><code>provisioning module load {kind} {name}</code></pre>" in text


def test_a_template_is_installed_by_loading_it(client: Client, publisher: Publisher) -> None:
    publisher("web-app", "1.0.0", type="template")
    text = page(client, "/extensions/web-app/")
    assert text.count("<pre><code>provisioning module load template web-app</code></pre>") == 1


def test_an_extension_whose_versions_are_all_yanked_is_shown_as_such(
    client: Client, publisher: Publisher, user: AbstractBaseUser
) -> None:
    publisher("gone", "1.0.0")
    yank(user, "gone", "1.0.0", "superseded")
    text = page(client, "/extensions/gone/")
    assert "Every version of gone is yanked" in text
    assert '<q class="yank-reason">superseded</q>' in text
    assert "nothing is installed unless a version is pinned exactly" in text
    assert "(every version yanked)" in text
    search = page(client, "/search?q=gone")
    assert '<span class="badge badge-yanked">every version yanked</span>' in search


# --- a version ------------------------------------------------------------------------------------


def test_the_version_page_shows_its_files_provides_compatibility_and_build(client: Client, catalog: Any) -> None:
    text = page(client, "/extensions/etcd/3.5.12/")
    assert '<h1>etcd <span class="version">3.5.12</span></h1>' in text
    assert "<pre><code>provisioning taskserv create etcd --infra DIR --version 3.5.12</code></pre>" in text
    files = client.get("/api/v1/extensions/etcd/versions/3.5.12/").json()["data"]["files"]
    assert f'Files <span class="count">{len(files)}</span>' in text
    for entry in files:
        assert f"<tr><td><code>{entry['path']}</code></td>" in text
        assert f'title="{entry["sha256"]}">{entry["sha256"][:12]}…</code>' in text
    assert "<li>taskservs: <code>etcd</code></li>" in text
    assert "<dt>Provisioning runtime</dt>\n    <dd><code>&gt;=1.0.0</code></dd>" in text
    assert f'<a href="/builds/{catalog["etcd"]["id"]}/">Build log of this version</a>' in text
    assert '<tr class=" current" aria-current="page">' in text


def test_a_yanked_version_says_so_and_points_at_the_latest(client: Client, catalog: Any) -> None:
    text = page(client, "/extensions/etcd/3.5.9/")
    assert "<strong>This version is yanked.</strong>" in text
    assert '<q class="yank-reason">data loss on restart</q>' in text
    assert 'The latest version is <a href="/extensions/etcd/3.5.12/">3.5.12</a>.' in text


def test_another_spelling_of_a_version_redirects_to_its_address(client: Client, catalog: Any) -> None:
    response = client.get("/extensions/etcd/3.5.12+build.7/")
    assert response.status_code == 301
    assert response["Location"] == "/extensions/etcd/3.5.12/"


# --- a build --------------------------------------------------------------------------------------


def test_the_build_page_shows_the_step_log_with_timings_and_the_version(client: Client, catalog: Any) -> None:
    build = catalog["kubernetes"]
    text = page(client, f"/builds/{build['id']}/")
    assert '<span class="badge status status-succeeded">Succeeded</span>' in text
    steps = re.findall(r'<th scope="row">([^<]+)</th>', text)
    assert steps == [entry["step"] for entry in build["log"]]
    assert "validate" in steps and "commit" in steps
    for entry in build["log"]:
        assert f'<td class="num">{floatformat(entry["seconds"], 3)}</td>' in text
    assert 'Published <a href="/extensions/kubernetes/1.28.0/">kubernetes 1.28.0</a>' in text
    assert f'<a href="/api/v1/builds/{build["id"]}/">This build as JSON</a>' in text


def test_a_failed_build_shows_its_error_escaped(client: Client, publisher: Publisher, token: str) -> None:
    path = publisher.package("k9s", "1.0.0", extra_files={f"templates/{HOSTILE}.j2": "{% if %}"})
    build_id = failed_build(client, token, path)
    text = page(client, f"/builds/{build_id}/")
    assert '<span class="badge status status-failed">Failed</span>' in text
    assert "The build failed: <code>invalid_archive</code>" in text
    assert f'<pre class="error-message">content check failed: templates/{ESCAPED}.j2: invalid Jinja2' in text
    assert f"templates/{ESCAPED}.j2: invalid Jinja2 template at line 1" in text.split('id="log-title"')[1]
    assert HOSTILE not in text


# --- what authors wrote is escaped; the README is sanitized ----------------------------------------


def test_author_text_is_escaped_on_every_page(
    client: Client, publisher: Publisher, user: AbstractBaseUser, token: str
) -> None:
    build = publisher("evil", "1.0.0", description=HOSTILE, extra_files={f"docs/{HOSTILE}.md": "x"}, keywords=("kw",))
    publisher("evil", "1.0.1", description=HOSTILE, keywords=("kw",))
    yank(user, "evil", "1.0.0", HOSTILE)
    for url in ("/", "/search?q=evil", "/search?keyword=kw", "/extensions/evil/", "/extensions/evil/1.0.0/"):
        text = page(client, url)
        assert HOSTILE not in text, url
        assert ESCAPED in text, url
    text = page(client, f"/builds/{build['id']}/")
    assert HOSTILE not in text
    # What a person typed is escaped too.
    typed = "<script>alert('q')</script>"
    search = page(client, "/search?" + urllib.parse.urlencode({"q": typed}))
    assert typed not in search and f"Nothing matches “{html.escape(typed)}”" in search
    assert f'value="{html.escape(typed)}"' in search


def test_a_script_in_a_readme_never_reaches_the_page(client: Client, publisher: Publisher) -> None:
    readme = (
        "# Title\n\n<script>alert('readme')</script>\n\n"
        '<img src="x" onerror="alert(2)">\n\n[click](javascript:alert(3))\n\n![badge](https://example.com/b.svg)\n'
    )
    publisher("scripted", "1.0.0", readme=readme)
    for url in ("/extensions/scripted/", "/extensions/scripted/1.0.0/"):
        text = page(client, url)
        readme_html = text.split('<article class="readme">')[1].split("</article>")[0]
        assert "<script" not in readme_html
        assert "<p>&lt;script&gt;alert('readme')&lt;/script&gt;</p>" in readme_html  # shown as text
        assert '<img src="x"' not in readme_html
        assert 'href="javascript:' not in readme_html
        assert '<img src="https://example.com/b.svg" alt="badge">' in readme_html
        # The only scripts on the page are the catalog's own file, never inline.
        assert re.findall(r"<script[^>]*>", text) == ['<script src="/static/registry/catalog.js" defer>']
        assert " style=" not in text


# --- headers, caching, errors ---------------------------------------------------------------------


def catalog_urls(catalog: dict[str, Any]) -> list[str]:
    return [
        "/",
        "/search?q=etcd",
        "/extensions/etcd/",
        "/extensions/etcd/3.5.12/",
        f"/builds/{catalog['etcd']['id']}/",
    ]


def test_every_catalog_page_has_the_strict_content_security_policy(client: Client, catalog: Any) -> None:
    for url in [*catalog_urls(catalog), "/extensions/nope/"]:
        response = client.get(url)
        csp = response["Content-Security-Policy"]
        assert "default-src 'self'" in csp and "script-src 'self'" in csp and "style-src 'self'" in csp
        assert "img-src 'self' https: data:" in csp
        assert "object-src 'none'" in csp and "frame-ancestors 'none'" in csp and "base-uri 'none'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["X-Frame-Options"] == "DENY"
        assert response["Referrer-Policy"] == "same-origin"


def test_pages_answer_conditional_requests_and_change_when_the_catalog_does(
    client: Client, catalog: Any, user: AbstractBaseUser
) -> None:
    etags = {}
    for url in catalog_urls(catalog):
        response = client.get(url)
        assert response["Cache-Control"] == "public, max-age=0, must-revalidate"
        etags[url] = response["ETag"]
        assert client.get(url, HTTP_IF_NONE_MATCH=etags[url]).status_code == 304, url
    build = client.get(f"/builds/{catalog['etcd']['id']}/")
    assert build["Last-Modified"]
    assert client.get(build.wsgi_request.path, HTTP_IF_MODIFIED_SINCE=build["Last-Modified"]).status_code == 304
    # A download changes the counts shown on the listings and the extension's pages.
    client.get("/api/v1/extensions/etcd/versions/3.5.12/download")
    downloadcounts.flush()
    for url in ("/", "/search?q=etcd", "/extensions/etcd/", "/extensions/etcd/3.5.12/"):
        assert client.get(url, HTTP_IF_NONE_MATCH=etags[url]).status_code == 200, url
    # A new dependent changes the extension's page; so does a yank.
    etag = client.get("/extensions/kubernetes/")["ETag"]
    yank(user, "k8s-ha", "1.0.0", "broken")
    assert client.get("/extensions/kubernetes/", HTTP_IF_NONE_MATCH=etag).status_code == 200


def test_a_page_of_a_build_still_running_is_never_cached_and_refreshes_itself(client: Client, catalog: Any) -> None:
    from builds.models import Build

    Build.objects.filter(pk=catalog["etcd"]["id"]).update(status=Build.Status.RUNNING, finished_at=None)
    response = client.get(f"/builds/{catalog['etcd']['id']}/")
    assert response["Cache-Control"] == "no-store"
    assert "ETag" not in response
    assert '<meta http-equiv="refresh" content="3">' in response.content.decode()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("/extensions/nope/", "no extension named &#x27;nope&#x27; in this registry"),
        ("/extensions/Bad_Name/", "it is not a valid name"),
        ("/extensions/etcd/9.9.9/", "etcd has no version 9.9.9; published versions: 3.5.12, 3.5.9"),
        ("/extensions/etcd/not-a-version/", "is not a valid version"),
        ("/builds/00000000-0000-0000-0000-000000000000/", "There is no build 00000000-0000-0000-0000-000000000000"),
        ("/builds/xyz/", "build ids are UUIDs"),
        ("/no/such/page", "There is no page at /no/such/page."),
    ],
)
def test_unknown_pages_are_html_404s_saying_what_is_missing(
    client: Client, catalog: Any, url: str, message: str
) -> None:
    text = page(client, url, status=404)
    assert "<h1>Not found</h1>" in text
    assert message in text
    assert '<form class="header-search"' in text  # the catalog's layout, with its search box


def test_the_404_of_a_misspelt_extension_links_the_close_names(client: Client, catalog: Any) -> None:
    text = page(client, "/extensions/kubernets/", status=404)
    assert "no extension named &#x27;kubernets&#x27; in this registry" in text
    assert 'Did you mean <a href="/extensions/kubernetes/">kubernetes</a>?' in text
    assert "; did you mean" not in text  # linked instead of repeated


def test_api_paths_keep_their_json_404(client: Client, db: None) -> None:
    response = client.get("/api/v1/nothing-here")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_an_address_without_its_trailing_slash_redirects(client: Client, catalog: Any) -> None:
    for url in ("/extensions/etcd", "/extensions/etcd/3.5.12"):
        response = client.get(url)
        assert response.status_code == 301 and response["Location"] == url + "/"
    # Never a redirect to another site: //host/... is a protocol-relative address.
    request = RequestFactory().get("/")
    request.path = request.path_info = "//evil.example/extensions/etcd"
    assert views.handler404(request).status_code == 404


def test_pages_are_read_only(client: Client, catalog: Any) -> None:
    assert client.head("/extensions/etcd/").status_code == 200
    assert client.post("/extensions/etcd/").status_code == 405
    assert client.post("/search").status_code == 405


def test_the_stylesheet_and_script_are_served_from_this_origin(client: Client, db: None) -> None:
    css = client.get("/static/registry/catalog.css")
    assert css.status_code == 200 and css["Content-Type"].startswith("text/css")
    script = client.get("/static/registry/catalog.js")
    assert script.status_code == 200
    text = page(client, "/")
    assert "https://" not in "".join(re.findall(r'(?:href|src)="[^"]*"', text.split("<body>")[0]))


segment = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


@hsettings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=segment, b=segment, params=st.dictionaries(st.sampled_from(["q", "type", "keyword", "page"]), segment))
@example(a="etcd", b="3.5.12", params={"page": "99999999999999999999"})
@example(a="etcd", b="1.0.0-" + "9" * 200, params={"q": "\x00"})
@example(a="\x00", b="..", params={"type": "\x00", "keyword": "\x00"})
def test_no_path_or_query_string_gets_a_500(
    client: Client, etcd_only: None, a: str, b: str, params: dict[str, str]
) -> None:
    quote = urllib.parse.quote
    query = urllib.parse.urlencode(params)
    for url in (
        f"/extensions/{quote(a, safe='')}/",
        f"/extensions/{quote(a, safe='')}/{quote(b, safe='')}/",
        f"/extensions/etcd/{quote(b, safe='')}/",
        f"/builds/{quote(a, safe='')}/",
        f"/search?{query}",
        f"/?{query}",
        f"/{quote(a, safe='')}",
    ):
        response = client.get(url)
        assert response.status_code < 500, url
        if response.status_code == 404 and not url.startswith("/api/"):
            assert response["Content-Type"] == HTML


@pytest.fixture
def etcd_only(publisher: Publisher) -> None:
    publisher("etcd", "3.5.12")
