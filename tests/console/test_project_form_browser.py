"""Acceptance: in a real browser (Debian's chromium through Playwright), the Add project form fits
its window, and a refused seed's reason shows next to the "Allow private" checkbox it needs."""

import shutil

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from tests.console.test_admin_browser import ARTIFACTS, PASSWORD, chromium_page, log_in

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (scripts/system-deps.sh)"),
]

WINDOW = {"width": 1400, "height": 900}
NEAR = 300  # px: the reason and the checkbox in one glance


def box(page, selector: str) -> dict:
    return page.eval_on_selector(
        selector,
        "e => { const b = e.getBoundingClientRect(); return {top: b.top + scrollY, bottom: b.bottom + scrollY}; }",
    )


def test_a_refused_loopback_seed_says_to_tick_allow_private_next_to_it(live_server):
    get_user_model().objects.create_superuser("operator", "operator@example.com", PASSWORD)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    with chromium_page(viewport=WINDOW) as page:
        log_in(page, live_server.url)
        page.goto(f"{live_server.url}/admin/crawl/project/add/")
        page.fill("#id_name", "intranet")
        page.fill("#id_seeds-0-url", "http://127.0.0.1:9/")
        page.click("input[name=_save]")
        refusal = page.locator("#seeds-group .errorlist", has_text="127.0.0.1")
        expect(refusal).to_have_count(1)
        page_width = page.evaluate("document.documentElement.scrollWidth")
        message, checkbox = box(page, "#seeds-group .errorlist"), box(page, "#id_allow_private")
        text = refusal.inner_text()
        page.screenshot(path=str(ARTIFACTS / "project-add-refused-seed.png"), full_page=True)

    problems = []
    if page_width > WINDOW["width"]:
        problems.append(f"the page is {page_width} px wide in a {WINDOW['width']} px window")
    distance = max(message["top"] - checkbox["bottom"], checkbox["top"] - message["bottom"], 0)
    if distance > NEAR:
        problems.append(f"the reason is {distance:.0f} px from the Allow private checkbox")
    if "Allow private" not in text:
        problems.append(f"the reason does not name the checkbox: {text!r}")
    assert not problems, "\n".join(problems)
