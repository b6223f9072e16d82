"""Acceptance, in Chromium: the alert list keeps each alert on one line with every column in the
window, and Try a URL is one click from where login lands (issue 48, point 11)."""

import shutil
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect

from console.health.models import Alert, Monitor
from console.health.monitors import monitors_ensure
from crawl.models import Project
from tests.console.test_admin_browser import ARTIFACTS, PASSWORD, chromium_page

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (scripts/system-deps.sh)"),
]
LONG = (
    "shop: template changed? rule set products: field 'price' in 0% of its items over the last 120 pages, "
    "against 100% before; the selector span.price found nothing on any of them since the redesign"
)


def alerts() -> None:
    project = Project.objects.create(name="redesigned shop", slug="redesigned-shop")
    monitors_ensure([project.id])
    monitor = Monitor.objects.get(project=project, kind="template_changed")
    now = timezone.now()
    for n in range(5):
        Alert.objects.create(
            project=project, monitor=monitor, subject=f"rule:products field 'f{n}'", message=LONG,
            since=now - timedelta(hours=n), resolved_at=now if n else None,
            evidence={"sample_pages": [1, 2]} if n % 2 else {},  # a link to the debugger in their row
        )  # fmt: skip


def test_the_alert_list_keeps_each_alert_on_one_line_and_every_column_in_sight(live_server):
    get_user_model().objects.create_superuser("operator", "operator@example.com", PASSWORD)
    alerts()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with chromium_page() as page:
        page.goto(f"{live_server.url}/")
        page.fill("#id_username", "operator")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.wait_for_load_state()
        landed = page.url
        link = page.get_by_role("link", name="Try a URL")
        expect(link.first).to_be_visible()  # where login lands, not only on /admin/

        page.goto(f"{live_server.url}/admin/console/alert/")
        rows = page.locator("#result_list tbody tr")
        expect(rows).to_have_count(5)
        heights = [rows.nth(i).bounding_box()["height"] for i in range(5)]
        last = page.locator("#result_list thead th").last.bounding_box()
        shown = page.locator("#changelist .results").bounding_box()  # what is not scrolled out of sight
        width = min(page.viewport_size["width"], shown["x"] + shown["width"])
        page.screenshot(path=str(ARTIFACTS / "alert-list.png"), full_page=True)
    assert max(heights) < 50, f"rows {heights} px tall"
    assert last["x"] + last["width"] <= width, f"the last column ends at {last['x'] + last['width']} of {width} px"
    assert "/admin/login/" not in landed
