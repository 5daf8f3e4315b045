"""A version's Interface section in a real browser (Debian's Chromium, Playwright): the bundled aws
provider's schemas, their attributes, checks and environment; a parent schema followed by its
anchor, author text shown as text, and axe-core finding no serious or critical violation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import BrowserPage, assert_accessible, screenshot

pytestmark = pytest.mark.browser

EXAMPLES = Path(__file__).resolve().parents[2] / "extensions"
SCHEMAS = '''\
schema Base:
    """The common part. <img src=x onerror=alert(1)>"""
    name: str

schema Child(Base):
    """More."""
    size?: int = 1
'''


@pytest.fixture
def published(transactional_db: None, tmp_path: Path) -> None:
    """The aws example and a package whose schemas extend each other, published through the API
    before the browser starts (Playwright's event loop refuses Django's database access)."""
    from django.test import Client

    from extensions.archive import build_package
    from tests.factories import make_token, make_user, publish, publish_new

    client = Client()
    token = make_token(make_user("alice"))
    built = build_package(EXAMPLES / "providers" / "aws" / "1.0.0", tmp_path / "aws")
    assert publish(client, token, built.path).json()["data"]["status"] == "succeeded"
    publish_new(client, token, tmp_path / "family", "family", "1.0.0", extra_files={"kcl/family.k": SCHEMAS})


def test_the_interface_section_reads_well_and_its_links_work(
    live_server: Any, published: None, browser_page: BrowserPage, axe_source: str
) -> None:
    page = browser_page.page
    page.goto(f"{live_server.url}/extensions/aws/1.0.0/")
    section = page.locator("#interface")
    assert section.locator("h3").all_inner_texts()[:3] == ["AwsVolume", "AwsServer", "AwsProvider"]
    server = section.locator("#interface-1")
    rows = server.locator("tbody tr")
    assert rows.nth(0).locator("th").inner_text() == "name required"
    key_name = rows.filter(has_text="key_name").locator("td")
    assert key_name.all_inner_texts() == ["str", "none", "an EC2 key pair for SSH"]
    assert "ami must be an AMI id such as ami-0123456789abcdef0" in server.locator("ul").inner_text()
    assert "AWS_REGION" in section.locator("dl").inner_text()
    screenshot(page, "interface-1-aws")
    # (Not audited here: the aws README's wide code blocks are scrollable regions without keyboard
    # access, a finding of the README's rendering, not of this section.)

    page.goto(f"{live_server.url}/extensions/family/1.0.0/")
    assert page.locator("#interface-0 p").nth(1).inner_text() == "The common part. <img src=x onerror=alert(1)>"
    page.locator("#interface-1").get_by_role("link", name="Base").click()
    page.wait_for_url("**/extensions/family/1.0.0/#interface-0")
    screenshot(page, "interface-2-family")
    assert_accessible(page, axe_source)
    assert browser_page.problems == []
