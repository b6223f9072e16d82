"""Acceptance: in a real browser (Debian's chromium through Playwright), the dashboard's health
chart fills its panel, its alert labels sit over their own bands without covering each other, and
its times are the browser's, like the throughput chart's."""

import re
import shutil
from collections import Counter
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect

from console.health.counters import counters_add
from console.health.models import Alert, Monitor
from console.health.monitors import monitors_ensure
from crawl.models import Project
from tests.console.test_admin_browser import ARTIFACTS, PASSWORD, chromium_page, log_in

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (scripts/system-deps.sh)"),
]

BOXES = """els => els.map(e => { const b = e.getBoundingClientRect();
    return {left: b.left, right: b.right, top: b.top, bottom: b.bottom, text: e.textContent}; })"""


def project_down_and_changed(monkeypatch) -> Project:
    """A project counted for 40 minutes, down and redesigned at once for the last 10 (two alerts
    open from the same moment), after a short alert that recovered."""
    project = Project.objects.create(name="troubled shop", slug="troubled-shop")
    monitors_ensure([project.id])
    now = timezone.now()
    for minutes_ago in range(40, 0, -1):
        monkeypatch.setattr("console.health.counters.timezone.now", lambda m=minutes_ago: now - timedelta(minutes=m))
        counters_add(None, project_id=project.id, counts=Counter({("project", "", "fetch_ok"): 5}))
    monkeypatch.undo()
    down = Monitor.objects.get(project=project, kind="site_down")
    changed = Monitor.objects.get(project=project, kind="template_changed")
    since = now - timedelta(minutes=10)
    Alert.objects.create(project=project, monitor=down, subject="shop.test", message="down", since=since)
    Alert.objects.create(
        project=project, monitor=changed, subject="rule:products field 'price'", message="changed", since=since
    )
    Alert.objects.create(
        project=project,
        monitor=down,
        subject="cdn.test",
        message="down",
        since=now - timedelta(minutes=30),
        resolved_at=now - timedelta(minutes=22),
    )
    return project


def overlap(a: dict, b: dict) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


def minutes_of(label: str) -> int:
    hour, minute = map(int, re.search(r"(\d{1,2}):(\d{2})", label).groups())
    return (hour % 12) * 60 + minute


def test_the_health_chart_fills_its_panel_with_labels_apart_in_local_time(live_server, monkeypatch):
    get_user_model().objects.create_superuser("operator", "operator@example.com", PASSWORD)
    project = project_down_and_changed(monkeypatch)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    with chromium_page(timezone_id="Asia/Kolkata") as page:  # UTC+5:30: no hour of it reads as UTC
        log_in(page, live_server.url)
        page.goto(f"{live_server.url}/admin/dashboard/?project={project.id}")
        expect(page.locator("#health svg .alert-band")).to_have_count(3)
        expect(page.locator("#throughput-chart svg")).to_have_count(1)
        labels = page.eval_on_selector_all("#health svg .alert-band text", BOXES)
        bands = page.eval_on_selector_all("#health svg .alert-band rect", BOXES)
        panel = page.eval_on_selector("#health", "e => e.clientWidth")
        chart = page.eval_on_selector("#health svg", "e => e.getBoundingClientRect().width")
        axis = "#health svg text[y='208']"  # the time axis, along the bottom
        health_times = page.eval_on_selector_all(axis, "els => els.map(e => e.textContent)")
        throughput_times = page.eval_on_selector_all(
            "#throughput-chart text.label", "els => els.map(e => e.textContent)"
        )
        page.locator("#health").screenshot(path=str(ARTIFACTS / "health-chart-labels.png"))

    problems = []  # all of them, not only the first
    if chart < 0.95 * (panel - 24):
        problems.append(f"the chart is {chart:.0f} px wide in a {panel} px panel")
    for i, label in enumerate(labels):
        problems += [
            f"{label['text']!r} covers {other['text']!r}" for other in labels[i + 1 :] if overlap(label, other)
        ]
    for label, band in zip(labels, bands, strict=True):
        starts_over = band["left"] - 1 <= label["left"] <= band["right"] + 1
        ends_over = band["left"] - 1 <= label["right"] <= band["right"] + 1
        if not (starts_over or ends_over):
            problems.append(f"{label['text']!r} at {label} is not over its band {band}")
    if (
        any("UTC" in t for t in health_times + throughput_times)
        or abs(minutes_of(health_times[-1]) - minutes_of(throughput_times[-1])) > 1
    ):
        problems.append(f"the charts' times differ: {health_times} and {throughput_times}")
    assert not problems, "\n".join(problems)
