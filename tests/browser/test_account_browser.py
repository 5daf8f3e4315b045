"""The web catalog for people who act, in a real browser (Debian's Chromium driven by Playwright)
against pytest-django's live server with a real Celery worker on Redis: a user logs in, creates
an API token (shown once: a reload does not show it), uploads a package, watches its build
succeed live (the page updates without a reload), yanks the version and sees it marked, and adds
an owner. axe-core finds no serious or critical violation on any page, a screenshot of each step
is kept under var/screenshots/, and the pages fit a phone's width."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import BrowserPage, assert_accessible, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.redis, pytest.mark.slow]

PASSWORD = "correct horse battery staple"


@pytest.fixture
def seeded(transactional_db: None, tmp_path: Path) -> dict[str, Any]:
    """alice (with a password) owns etcd 3.5.9, published through the API; bob exists; the package
    etcd 3.6.0 is built on disk for alice to upload. Every database write happens here, before the
    browser starts (Playwright's sync API runs an event loop in this thread)."""
    from django.test import Client

    from tests.factories import make_token, make_user, package, publish_new

    alice = make_user("alice", password=PASSWORD)
    make_user("bob")
    publish_new(Client(), make_token(alice), tmp_path / "a", "etcd", "3.5.9")
    return {"package": package(tmp_path / "b", "etcd", "3.6.0")}


def fits_the_width(page: Any) -> bool:
    return bool(page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1"))


def overflowing(page: Any) -> list[str]:
    """The elements past the window's right edge (outside tables, which scroll on their own)."""
    script = """() => [...document.querySelectorAll('body *')]
        .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
        .filter(e => !(e.parentElement && e.parentElement.closest('.table-wrap')))
        .slice(0, 8).map(e => e.tagName + '.' + e.className)"""
    return list(page.evaluate(script))


def test_a_user_logs_in_creates_a_token_publishes_watches_the_build_yanks_and_adds_an_owner(
    live_server: Any, seeded: dict[str, Any], celery_worker_factory: Any, browser_page: BrowserPage, axe_source: str
) -> None:
    page = browser_page.page
    base = live_server.url

    # Log in from the header; back on the page it started from, the header names the user.
    page.goto(f"{base}/extensions/etcd/")
    page.locator(".account-nav").get_by_role("link", name="Log in").click()
    page.wait_for_url("**/accounts/login/?next=/extensions/etcd/")
    assert_accessible(page, axe_source)
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/extensions/etcd/")
    assert page.locator(".account-user").inner_text().endswith("alice")
    assert page.locator("#owner-controls").is_visible()
    screenshot(page, "account-1-logged-in")
    assert_accessible(page, axe_source)

    # The account page, then tokens: the secret is shown once.
    page.locator(".account-user").click()
    page.wait_for_url("**/account/")
    assert page.locator("table.owned").get_by_role("link", name="etcd").count() == 1
    screenshot(page, "account-2-account")
    assert_accessible(page, axe_source)
    page.get_by_role("link", name="Manage tokens").click()
    page.wait_for_url("**/account/tokens/")
    page.get_by_label("Name", exact=True).fill("laptop")
    page.get_by_label("Expires after (days)").fill("30")
    page.get_by_role("button", name="Create token").click()
    secret = page.locator("#new-token").inner_text()
    assert re.fullmatch(r"pvr_[A-Za-z0-9_-]{43}", secret), secret
    assert page.locator("button.copy").first.is_visible()  # the copy button of catalog.js
    screenshot(page, "account-3-token-created")
    assert_accessible(page, axe_source)
    page.reload()
    assert page.url == f"{base}/account/tokens/"
    assert page.locator("#new-token").count() == 0 and secret not in page.content()
    assert page.locator("table.tokens tbody th").filter(has_text="laptop").count() == 1
    screenshot(page, "account-4-tokens")
    assert_accessible(page, axe_source)

    # Publish from the browser: no worker yet, so the build page opens on a queued build.
    page.locator(".account-nav").get_by_role("link", name="Publish").click()
    page.wait_for_url("**/publish/")
    assert_accessible(page, axe_source)
    page.get_by_label("a built package").check()
    page.get_by_label("File").set_input_files(str(seeded["package"]))
    page.get_by_role("button", name="Upload and publish").click()
    page.wait_for_url(re.compile(r".*/builds/[0-9a-f-]{36}/$"))
    status = page.locator(".title-row .status")
    assert status.inner_text() == "Queued"
    assert page.locator("#build-live").get_attribute("data-followed") == "following"
    page.evaluate("() => { window.stillTheSamePage = true; }")
    screenshot(page, "account-5-build-queued")
    assert_accessible(page, axe_source)

    # A worker takes the build; the page follows it to the end without reloading.
    celery_worker_factory()
    page.wait_for_selector("#build-live[data-followed='ended']", timeout=60_000)
    assert status.inner_text() == "Succeeded"
    assert page.evaluate("() => window.stillTheSamePage") is True
    assert page.locator("table.log tbody th").last.inner_text() == "commit"
    assert page.locator("#live-status").inner_text() == "The build is succeeded."
    screenshot(page, "account-6-build-succeeded")
    assert_accessible(page, axe_source)

    # Yank the new version from the extension page's owner controls: it is marked at once.
    page.locator(".banner-success").get_by_role("link", name="etcd 3.6.0").click()
    page.wait_for_url("**/extensions/etcd/3.6.0/")
    page.goto(f"{base}/extensions/etcd/")
    page.get_by_label("Why yank 3.6.0").fill("broken on arm64")
    page.get_by_role("button", name="Yank 3.6.0").click()
    page.wait_for_url("**/extensions/etcd/#owner-controls")
    assert "Yanked etcd 3.6.0" in page.locator(".messages").inner_text()
    row = page.locator("table.versions tbody tr").filter(has_text="3.6.0")
    assert "yanked" in (row.get_attribute("class") or "") and "broken on arm64" in row.inner_text()
    assert page.get_by_role("button", name="Unyank 3.6.0").is_visible()
    screenshot(page, "account-7-yanked")
    assert_accessible(page, axe_source)

    # Add an owner.
    page.get_by_label("Add an owner").fill("bob")
    page.get_by_role("button", name="Add owner").click()
    page.wait_for_url("**/extensions/etcd/#owner-controls")
    assert "bob is now an owner of etcd" in page.locator(".messages").inner_text()
    assert page.locator(".sidebar .owners li").all_inner_texts() == ["alice", "bob"]
    screenshot(page, "account-8-owner-added")
    assert_accessible(page, axe_source)

    # On a phone: the controls and the tokens page fit the screen's width.
    page.set_viewport_size({"width": 375, "height": 800})
    for path in ("/extensions/etcd/", "/account/tokens/", "/publish/"):
        page.goto(f"{base}{path}")
        assert fits_the_width(page), (path, overflowing(page))
    screenshot(page, "account-9-phone")

    # Log out (a POST from the header).
    page.set_viewport_size({"width": 1280, "height": 900})
    page.locator(".account-nav").get_by_role("button", name="Log out").click()
    page.wait_for_url(f"{base}/")
    assert page.locator(".account-nav").get_by_role("link", name="Log in").is_visible()

    assert browser_page.problems == []
