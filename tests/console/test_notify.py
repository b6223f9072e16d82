"""Notifications and monitors without workers: the link's address, what an alert and its recovery
say, the site-down window, quiet hours, notification targets and rules of one's own over the API."""

import re
from datetime import UTC, datetime, time, timedelta

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from console.health.models import Alert, Monitor, NotificationTarget
from console.health.monitors import monitor_run
from console.health.notify import alert_text, alerts_announce, console_url
from console.health.quiet import quiet_end
from console.health.validators import DEFAULTS
from console.management.commands.serve import console_base_url_default
from scrape.models import RuleSet
from tests.console.health_helpers import count

T0 = datetime(2026, 11, 28, 12, 0, 30, tzinfo=UTC)
SHOP_RULES = {"item_selector": "div", "fields": {"title": {"css": "h2"}, "price": {"css": "i"}}, "required": ["title"]}


def site_down(project, at, **thresholds) -> tuple[int, int]:
    monitor = Monitor.objects.get(project=project, kind="site_down")
    monitor.thresholds = thresholds
    monitor.save()
    return monitor_run(monitor, project, at)


def client(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def test_serve_links_alerts_to_its_own_port_unless_console_base_url_says_otherwise(project, monkeypatch, settings):
    """Issue 48, point 4."""
    monkeypatch.delenv("CONSOLE_BASE_URL", raising=False)
    assert console_base_url_default("127.0.0.1", 8123) == "http://localhost:8123"
    assert console_url(project).startswith("http://localhost:8123/admin/dashboard/")
    monkeypatch.setenv("CONSOLE_BASE_URL", "https://crawl.example.com")
    assert console_base_url_default("0.0.0.0", 9000) == "https://crawl.example.com"


def test_an_announced_alert_keeps_the_figures_it_was_announced_with(project, monkeypatch, settings):
    """Issue 48, point 6: the message sent, the stored alert and the recovery agree."""
    settings.CONSOLE_HEALTH_BUCKET_SECONDS = 60
    failures = {("host", "shop.test", "fetch_failed"): 16, ("host", "shop.test", "error:http_503"): 16}
    count(project, T0 - timedelta(minutes=1), failures, monkeypatch)
    count(project, T0, failures, monkeypatch)
    assert site_down(project, T0 + timedelta(seconds=1), minutes=2) == (1, 0)
    assert alerts_announce(now=T0 + timedelta(seconds=1)) == 1
    alert = Alert.objects.get(project=project)
    sent = alert_text(alert, recovered=False)[1]
    assert "32 fetches failed" in sent

    later = T0 + timedelta(seconds=30)  # the older bucket left the window: 16 failures in it now
    assert site_down(project, later, minutes=1) == (0, 0)
    alert.refresh_from_db()
    assert "32 fetches failed" in alert.message and alert.evidence["failed"] == 32

    count(project, later, {("host", "shop.test", "fetch_ok"): 3}, monkeypatch)
    assert site_down(project, later + timedelta(seconds=1), minutes=1) == (0, 1)
    alert.refresh_from_db()
    recovery = alert_text(alert, recovered=True)[1]
    words = re.sub(r"https?://\S+", "", recovery)  # the console link carries the project's id
    assert not re.search(r"\b(16|32)\b", words) and "http_503" not in recovery, recovery


@pytest.mark.parametrize(("seconds", "said"), [(60, "1 minute "), (45, "45 seconds"), (125 * 60, "2 h 5 min")])
def test_a_recovery_says_how_long_it_lasted_in_words(project, seconds, said):
    """Issue 48, point 11: "Recovered after 1 minutes"."""
    monitor = Monitor.objects.get(project=project, kind="job_failed")
    alert = Alert.objects.create(
        project=project,
        monitor=monitor,
        subject="jobs",
        message="m",
        since=T0,
        resolved_at=T0 + timedelta(seconds=seconds),
    )
    body = alert_text(alert, recovered=True)[1]
    assert f"after {said}" in body and "1 minutes" not in body


def test_site_down_looks_back_no_further_than_its_window(project, monkeypatch, settings):
    """Issue 48, point 13: a short default window, and no whole bucket from before it."""
    settings.CONSOLE_HEALTH_BUCKET_SECONDS = 60
    assert DEFAULTS["site_down"]["minutes"] <= 5
    count(project, T0 - timedelta(seconds=40), {("host", "shop.test", "fetch_ok"): 1}, monkeypatch)  # 11:59:50
    count(project, T0, {("host", "shop.test", "fetch_failed"): 3}, monkeypatch)
    assert site_down(project, T0 + timedelta(seconds=20), minutes=1) == (1, 0), "the answer came before the window"
    assert "in the last 1 minute (" in Alert.objects.get(project=project).message


@pytest.mark.parametrize(
    ("start", "end", "at", "ends"),
    [
        (time(22), time(7), datetime(2026, 11, 28, 23, 30, tzinfo=UTC), datetime(2026, 11, 29, 7, tzinfo=UTC)),
        (time(22), time(7), datetime(2026, 11, 28, 6, 59, tzinfo=UTC), datetime(2026, 11, 28, 7, tzinfo=UTC)),
        (time(22), time(7), datetime(2026, 11, 28, 12, tzinfo=UTC), None),
        (time(9), time(17), datetime(2026, 11, 28, 8, 30, tzinfo=UTC), datetime(2026, 11, 28, 16, tzinfo=UTC)),
    ],
)
def test_quiet_hours_are_read_in_the_targets_time_zone(start, end, at, ends):
    zone = "Europe/Paris" if start == time(9) else "UTC"  # 09:30 in Paris
    target = NotificationTarget(name="t", url="json://x", quiet_from=start, quiet_until=end, quiet_timezone=zone)
    assert quiet_end(target, at) == ends


@pytest.fixture
def admin(django_user_model):
    return django_user_model.objects.create_superuser("root", "root@example.com", "not-used")


@pytest.fixture
def operator(django_user_model):
    user = django_user_model.objects.create_user("ops", password="not-used")
    user.groups.add(Group.objects.get(name="operator"))
    return user


def test_notification_targets_have_an_admin_only_api_with_masked_secrets(project, admin, operator):
    """Issue 48, point 13."""
    url = "mailtos://team:hunter2-secret@smtp.example.com?to=ops@example.com"
    made = client(admin).post(
        "/api/notification-targets/",
        {"project": "watched", "name": "team mail", "url": url, "quiet_from": "22:00", "quiet_until": "07:00"},
        format="json",
    )
    assert made.status_code == 201, made.json()
    assert "hunter2" not in str(made.json())
    listed = client(admin).get("/api/notification-targets/").json()["results"]
    assert [t["name"] for t in listed] == ["team mail"] and "hunter2" not in str(listed)
    back = client(admin).patch(
        f"/api/notification-targets/{listed[0]['id']}/", {"url": listed[0]["url"]}, format="json"
    )
    assert back.status_code == 200 and NotificationTarget.objects.get().url == url, "the masked URL keeps the stored"
    half = client(admin).post(
        "/api/notification-targets/", {"name": "x", "url": "json://127.0.0.1/x", "quiet_from": "22:00"}, format="json"
    )
    assert half.status_code == 400 and "both ends" in str(half.json())
    assert client(operator).get("/api/notification-targets/").status_code == 403


def test_a_rule_of_ones_own_is_made_over_the_api_and_refuses_a_field_nobody_watches(project, operator):
    """Issue 48, point 15 (and 13: a rule set with required fields watches only those)."""
    from django.contrib.auth.models import Permission

    from console.access.policy import ALL_PROJECTS

    app, codename = ALL_PROJECTS.split(".")
    operator.user_permissions.add(Permission.objects.get(content_type__app_label=app, codename=codename))
    RuleSet.objects.create(project=project, name="shop", spec=SHOP_RULES)
    api = client(operator)
    rule = {"project": "watched", "kind": "fill_rate", "name": "prices", "watch": "shop.price", "threshold": 90}
    refused = api.post("/api/monitors/", rule | {"window_minutes": 60}, format="json")
    assert refused.status_code == 400 and "watches only title" in str(refused.json())
    made = api.post("/api/monitors/", rule | {"watch": "shop.title", "window_minutes": 60}, format="json")
    assert made.status_code == 201, made.json()
    assert made.json()["in_effect"] == {"watch": "shop.title", "threshold": 90.0, "minutes": 60}
    no_window = api.post("/api/monitors/", rule | {"name": "p2", "watch": "shop.title"}, format="json")
    assert no_window.status_code == 400 and "window_minutes" in no_window.json()
    built_in = Monitor.objects.get(project=project, kind="site_down")
    assert api.delete(f"/api/monitors/{built_in.id}/").status_code == 400
    assert api.delete(f"/api/monitors/{made.json()['id']}/").status_code == 204


def test_the_rule_set_form_says_which_fields_the_monitors_watch(project, admin_client):
    """Issue 48, point 13."""
    rules = RuleSet.objects.create(project=project, name="shop", spec=SHOP_RULES)
    page = admin_client.get(f"/admin/scrape/ruleset/{rules.id}/change/").content.decode()
    assert "a vanished optional field" in page
    assert (
        "a vanished optional field" in admin_client.get(f"/admin/crawl/project/{project.id}/change/").content.decode()
    )


def test_rules_of_ones_own_fire_on_errors_per_hour_and_recover(project, monkeypatch):
    """Issue 48, point 15: the same alert and recovery as the built-in monitors."""
    monitor = Monitor.objects.create(
        project=project, kind="errors_per_hour", name="503s", watch="http_503", threshold=100, window_minutes=10
    )
    count(project, T0, {("project", "", "error:http_503"): 30}, monkeypatch)  # 180 per hour
    assert monitor_run(monitor, project, T0 + timedelta(seconds=30)) == (1, 0)
    assert "30 errors http_503 in the last 10 minutes" in Alert.objects.get(monitor=monitor).message
    assert monitor_run(monitor, project, T0 + timedelta(minutes=11)) == (0, 1)
