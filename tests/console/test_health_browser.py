"""Acceptance: in a real browser (Debian's chromium through Playwright), the overview's health
column and the project's health chart show a template-change alert."""

import shutil
from collections import Counter
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect

from console.health.counters import counters_add
from console.health.models import Monitor
from console.health.monitors import monitor_run, monitors_ensure
from crawl.models import Project
from tests.console.test_admin_browser import ARTIFACTS, PASSWORD, chromium_page, log_in

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (scripts/system-deps.sh)"),
]


def counted(project, at, pages: int, with_price: int, fetched: int, monkeypatch) -> None:
    """Counts as the pipeline sends them, written at `at`."""
    counts = Counter(
        {
            ("project", "", "fetch_ok"): fetched,
            ("rules", "rule:products", "pages"): pages,
            ("rules", "rule:products", "items"): pages,
            ("rules", "rule:products", "field:title"): pages,
            ("rules", "rule:products", "field:price"): with_price,
        }
    )
    monkeypatch.setattr("console.health.counters.timezone.now", lambda: at)
    counters_add(None, project_id=project.id, counts=counts)
    monkeypatch.undo()


def changed_template_project(monkeypatch) -> Project:
    project = Project.objects.create(name="redesigned shop", slug="redesigned-shop")
    calm = Project.objects.create(name="calm shop", slug="calm-shop")
    monitors_ensure([project.id, calm.id])
    now = timezone.now()
    for minutes_ago in range(20, 4, -1):
        counted(project, now - timedelta(minutes=minutes_ago), 6, 6, 6, monkeypatch)
    for minutes_ago in (3, 2, 1):
        counted(project, now - timedelta(minutes=minutes_ago), 6, 0, 6, monkeypatch)
    monitor = Monitor.objects.get(project=project, kind="template_changed")
    assert monitor_run(monitor, project, now) == (1, 0)
    return project


def test_the_overview_and_the_health_chart_show_a_template_change(live_server, monkeypatch):
    get_user_model().objects.create_superuser("operator", "operator@example.com", PASSWORD)
    project = changed_template_project(monkeypatch)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    base = live_server.url

    with chromium_page() as page:
        log_in(page, base)
        page.goto(f"{base}/admin/dashboard/")
        health = page.locator("tr[data-project=redesigned-shop] .overview-health")
        expect(health.locator(".health")).to_have_text("failing")
        expect(health).to_contain_text("template changed? rule set products: field 'price' in 0% of its items")
        expect(page.locator("tr[data-project=calm-shop] .overview-health .health")).to_have_text("ok")
        page.screenshot(path=str(ARTIFACTS / "overview-health.png"), full_page=True)

        page.goto(f"{base}/admin/dashboard/?project={project.id}")
        band = page.locator("#health svg .alert-band[data-monitor=template_changed]")
        expect(band).to_have_count(1)
        expect(band.locator("text")).to_have_text("template changed: rule:products field 'price'")
        expect(page.locator("#health svg .series-coverage polyline")).not_to_have_count(0)
        expect(page.locator("#health h2 .health")).to_have_text("failing")
        page.locator("#health").screenshot(path=str(ARTIFACTS / "health-chart.png"))
