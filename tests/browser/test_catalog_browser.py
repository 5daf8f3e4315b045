"""The web catalog in a real browser: Debian's Chromium driven by Playwright (never `playwright
install`) against pytest-django's live server. A person searches from the home page, opens a
result, reads its README and versions, follows a dependency, and opens the build log; the
stylesheet and the script load under the Content-Security-Policy (no console errors, no CSP
violations), axe-core finds no serious or critical violation on any page, and a screenshot of
each step is kept under var/screenshots/ (tests/browser/conftest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from tests.browser.conftest import BrowserPage, assert_accessible, screenshot

pytestmark = pytest.mark.browser


@pytest.fixture
def published(transactional_db: None, tmp_path: Path) -> dict[str, Any]:
    """etcd 3.5.9 (yanked) and 3.5.12, and kubernetes 1.28.0 depending on etcd, published through
    the API with real commits (the live server's thread reads the same database). Everything
    that touches the database happens before the browser starts: Playwright's sync API runs an
    event loop in this thread, where Django refuses synchronous database access."""
    from registry import services
    from registry.tokens import Actor
    from tests.factories import make_token, make_user, publish_new

    client = Client()
    alice = make_user("alice")
    token = make_token(alice)
    readme = "# etcd\n\nA distributed, **reliable** key-value store.\n\n## Usage\n\n```sh\netcdctl get key\n```\n"
    publish_new(client, token, tmp_path / "a", "etcd", "3.5.9", keywords=("kv",))
    etcd = publish_new(client, token, tmp_path / "b", "etcd", "3.5.12", keywords=("kv", "consensus"), readme=readme)
    kubernetes = publish_new(
        client,
        token,
        tmp_path / "c",
        "kubernetes",
        "1.28.0",
        dependencies=["etcd ^3.5"],
        keywords=("containers", "orchestration"),
        description="Kubernetes container orchestrator",
        readme="# Kubernetes\n\nInstalls a **Kubernetes** control plane.\n\n| component | port |\n|---|---|\n"
        "| api | 6443 |\n",
    )
    services.version_yank(actor=Actor(user=alice), name="etcd", version="3.5.9", reason="data loss on restart")
    return {"etcd": etcd, "kubernetes": kubernetes}


def test_a_person_searches_reads_follows_a_dependency_and_opens_the_build_log(
    live_server: Any, published: dict[str, Any], browser_page: BrowserPage, axe_source: str
) -> None:
    page = browser_page.page

    # The home page: search from the big search box.
    page.goto(f"{live_server.url}/")
    assert page.title() == "Provisioning extensions"
    # The stylesheet applied (a served file, allowed by the CSP).
    assert page.eval_on_selector(".site-header", "e => getComputedStyle(e).backgroundColor") == "rgb(19, 35, 58)"
    screenshot(page, "catalog-1-home")
    assert_accessible(page, axe_source)
    page.get_by_label("Search extensions by name, description or keyword").fill("kube")
    page.locator(".hero-search button[type=submit]").click()
    page.wait_for_url("**/search?q=kube")
    assert page.locator("ol.results > li").count() == 1
    assert page.locator("#header-q").input_value() == "kube"  # the header's box shows the query
    screenshot(page, "catalog-2-search")
    assert_accessible(page, axe_source)

    # Open the result: README rendered, versions table, install command with its copy button.
    page.get_by_role("link", name="kubernetes", exact=True).click()
    page.wait_for_url("**/extensions/kubernetes/")
    assert page.locator(".title-row h1").inner_text() == "kubernetes 1.28.0"
    assert page.locator("article.readme h1").inner_text() == "Kubernetes"
    assert page.locator("article.readme strong").inner_text() == "Kubernetes"
    assert page.locator("article.readme table td").all_inner_texts() == ["api", "6443"]
    assert page.locator("table.versions tbody tr").count() == 1
    assert page.locator(".install pre code").first.inner_text() == "provisioning taskserv create kubernetes --infra DIR"
    # The script ran (its buttons are hidden without it).
    assert page.locator("button.copy").first.is_visible()
    screenshot(page, "catalog-3-kubernetes")
    assert_accessible(page, axe_source)

    # Follow the dependency to etcd: two versions, the yanked one marked with its reason.
    page.locator("#dependencies").get_by_role("link", name="etcd", exact=True).click()
    page.wait_for_url("**/extensions/etcd/")
    assert page.locator(".title-row h1").inner_text() == "etcd 3.5.12"
    rows = page.locator("table.versions tbody tr")
    assert rows.count() == 2
    assert "yanked" in (rows.nth(1).get_attribute("class") or "")
    assert "data loss on restart" in rows.nth(1).inner_text()
    assert page.locator("#dependents").get_by_role("link", name="kubernetes").count() == 1
    assert page.locator("article.readme pre code").inner_text().strip() == "etcdctl get key"
    screenshot(page, "catalog-4-etcd")
    assert_accessible(page, axe_source)

    # The version page, then its build log.
    page.locator("table.versions").get_by_role("link", name="3.5.12", exact=True).click()
    page.wait_for_url("**/extensions/etcd/3.5.12/")
    assert page.locator("#files table tbody tr").count() >= 3
    assert page.locator(".install pre code").first.inner_text().endswith("--version 3.5.12")
    screenshot(page, "catalog-5-version")
    assert_accessible(page, axe_source)
    page.get_by_role("link", name="Build log of this version").click()
    page.wait_for_url(f"**/builds/{published['etcd']['id']}/")
    assert page.locator(".title-row .status").inner_text() == "Succeeded"
    steps = page.locator("table.log tbody th").all_inner_texts()
    assert steps == [entry["step"] for entry in published["etcd"]["log"]]
    screenshot(page, "catalog-6-build")
    assert_accessible(page, axe_source)
    page.get_by_role("link", name="etcd 3.5.12").first.click()
    page.wait_for_url("**/extensions/etcd/3.5.12/")

    assert browser_page.problems == []


@pytest.fixture
def choosing(published: dict[str, Any]) -> dict[str, Any]:
    """The published catalogue with downloads over the last days (written as the counter's flush
    writes them) and a provider, so search has facets to filter by."""
    from collections import Counter
    from datetime import UTC, datetime, timedelta

    from registry import downloadcounts
    from registry.models import Version

    today = datetime.now(UTC).date()
    kubernetes = Version.objects.get(extension__name="kubernetes").pk
    etcd = Version.objects.get(extension__name="etcd", canonical="3.5.12").pk
    counts = Counter({(kubernetes, (today - timedelta(days=d)).isoformat()): 1 + d % 4 for d in range(0, 60, 3)})
    counts[(etcd, today.isoformat())] = 7
    downloadcounts.write(counts)
    return published


def test_a_visitor_chooses_an_extension_by_search_facets_chart_and_graph(
    live_server: Any, choosing: dict[str, Any], browser_page: BrowserPage, axe_source: str
) -> None:
    page = browser_page.page
    page.goto(f"{live_server.url}/")
    assert page.locator("#popular-title").inner_text() == "Most downloaded"
    page.get_by_label("Search extensions by name, description or keyword").fill("kubernetes")
    page.locator(".hero-search button[type=submit]").click()
    page.wait_for_url("**/search?q=kubernetes")
    # Filter by kind: the facet says how many taskservs match before it is chosen.
    facet = page.locator(".facets").get_by_role("link", name="Taskservs 1")
    facet.click()
    page.wait_for_url("**/search?q=kubernetes&type=taskserv")
    assert page.locator(".facets a.current").inner_text() == "Taskservs 1"
    assert page.locator("ol.results > li").count() == 1
    screenshot(page, "choose-1-search-facets")
    assert_accessible(page, axe_source)

    page.locator("ol.results").get_by_role("link", name="kubernetes", exact=True).click()
    page.wait_for_url("**/extensions/kubernetes/")
    assert page.locator("article.readme h1").inner_text() == "Kubernetes"
    assert page.locator("table.versions tbody tr").count() == 1
    chart = page.locator("#downloads svg.chart")
    assert chart.is_visible()
    assert chart.locator("rect.chart-bar").count() == 20
    assert page.locator("#downloads-title .count").inner_text() == "50"
    graph = page.locator("#graph svg.graph")
    assert graph.is_visible()
    assert graph.locator("a.graph-node").count() == 2
    screenshot(page, "choose-2-extension-chart-graph")
    assert_accessible(page, axe_source)

    # Follow the dependency through the picture: click etcd's box.
    graph.locator('a.graph-node[href="/extensions/etcd/3.5.12/"]').click()
    page.wait_for_url("**/extensions/etcd/3.5.12/")
    assert page.locator(".title-row h1").inner_text() == "etcd 3.5.12"
    assert page.locator("#trust").get_by_text("SHA-256").is_visible()
    assert page.locator("#downloads-title .count").inner_text() == "7"
    screenshot(page, "choose-3-version-trust")
    assert_accessible(page, axe_source)
    assert browser_page.problems == []


def test_the_catalog_fits_a_phone(
    live_server: Any, choosing: dict[str, Any], browser_context: Any, axe_source: str
) -> None:
    from tests.browser.conftest import new_page

    phone = browser_context.browser.new_context(viewport={"width": 375, "height": 740}, is_mobile=True)
    watched = new_page(phone)
    page = watched.page
    for name, path in (
        ("phone-1-home", "/"),
        ("phone-2-search", "/search?q=e&keyword=kv"),
        ("phone-3-extension", "/extensions/kubernetes/"),
        ("phone-4-version", "/extensions/etcd/3.5.12/"),
        ("phone-5-not-found", "/extensions/kubernets/"),
    ):
        response = page.goto(f"{live_server.url}{path}")
        assert response is not None and response.status == (404 if "not-found" in name else 200), path
        # Nothing wider than the screen: the page never scrolls sideways (wide tables and the
        # graph scroll inside their own boxes).
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 375, (path, width)
        screenshot(page, name)
        assert_accessible(page, axe_source)
    # The one console error is the 404 page's own status.
    assert watched.problems == ["Failed to load resource: the server responded with a status of 404 (Not Found)"]
    phone.close()
