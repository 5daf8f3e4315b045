"""What every browser test shares: Debian's Chromium driven by Playwright (never `playwright
install`), a page that records console errors, failed requests and CSP violations, screenshots
kept under `var/screenshots/`, and the axe-core accessibility audit.

Missing Chromium, Playwright or axe-core skips locally and fails under CI=true (`make services`
installs Chromium, requirements-dev.txt pins Playwright, `make tools` installs axe-core)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "var" / "screenshots"
AXE_SOURCE = ROOT / ".tools" / "node_modules" / "axe-core" / "axe.min.js"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The impacts the catalog must never have (axe-core's scale: minor, moderate, serious, critical).
BLOCKING_IMPACTS = frozenset({"serious", "critical"})


def chromium_path() -> str | None:
    for candidate in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture
def chromium() -> str:
    path = chromium_path()
    require(path is not None, "Chromium (/usr/bin/chromium)")
    require(importlib.util.find_spec("playwright") is not None, "Playwright (pip install playwright)")
    assert path is not None
    return path


@pytest.fixture
def axe_source() -> str:
    require(AXE_SOURCE.is_file(), f"axe-core ({AXE_SOURCE.relative_to(ROOT)}; make tools)")
    return AXE_SOURCE.read_text(encoding="utf-8")


@dataclass
class BrowserPage:
    """A Playwright page with what went wrong on it so far (console errors, uncaught exceptions,
    failed requests: a CSP violation is reported as a console error)."""

    page: Any
    problems: list[str] = field(default_factory=list)


def _watch(page: Any, problems: list[str]) -> None:
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("requestfailed", lambda request: problems.append(f"request failed: {request.url}"))


@pytest.fixture
def browser_context(chromium: str, tmp_path: Path) -> Iterator[Any]:
    """A fresh browser context (its own cookies) at a desktop size; `new_page(context)` opens
    watched pages in it. More contexts (another user, a phone) come from `context.browser`."""
    from playwright.sync_api import sync_playwright

    home = tmp_path / "chromium-home"
    home.mkdir()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_FLAGS,
            env={**os.environ, "HOME": str(home)},
        )
        try:
            yield browser.new_context(viewport={"width": 1280, "height": 900})
        finally:
            browser.close()


def new_page(context: Any) -> BrowserPage:
    page = context.new_page()
    page.set_default_timeout(15_000)
    watched = BrowserPage(page)
    _watch(page, watched.problems)
    return watched


@pytest.fixture
def browser_page(browser_context: Any) -> BrowserPage:
    return new_page(browser_context)


def screenshot(page: Any, name: str) -> Path:
    """A full-page PNG of what the page shows now, kept as `var/screenshots/NAME.png`."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
        raise ValueError(f"screenshot name {name!r}: lowercase letters, digits and '-' only")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 1000, path
    return path


def accessibility_violations(page: Any, axe_source: str) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is now (WCAG 2.1 A and AA
    and best practices). axe is evaluated through the DevTools protocol, not a <script> tag,
    so the page's strict CSP stays as it is served."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(axe_source)
    result = page.evaluate(
        """async () => {
            const r = await window.axe.run(document, {
                runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']},
                resultTypes: ['violations'],
            });
            return r.violations.map(v => ({
                id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.slice(0, 5).map(n => n.target.join(' ') + ': ' + (n.failureSummary || '')),
            }));
        }"""
    )
    return [violation for violation in result if violation["impact"] in BLOCKING_IMPACTS]


def assert_accessible(page: Any, axe_source: str) -> None:
    violations = accessibility_violations(page, axe_source)
    assert violations == [], f"axe-core on {page.url}:\n{json.dumps(violations, indent=2)}"
