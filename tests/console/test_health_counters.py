"""Health counters and the monitors' checks on a real database, with counts written as the
pipeline writes them (crawl/health.py's signal), at chosen times."""

from datetime import timedelta

import pytest
from django.utils import timezone

from console.health.counters import health_figures, project_health
from console.health.models import Alert, Monitor
from console.health.monitors import monitor_run
from console.health.validators import thresholds_problem
from crawl.models import Project
from tests.console.health_helpers import count

pytestmark = pytest.mark.django_db
T0 = timezone.now().replace(microsecond=0) - timedelta(minutes=30)


def products(pages: int, with_price: int) -> dict:
    return {
        ("rules", "rule:products", "pages"): pages,
        ("rules", "rule:products", "items"): pages,
        ("rules", "rule:products", "field:title"): pages,
        ("rules", "rule:products", "field:price"): with_price,
    }


def run(project, kind: str, at, **thresholds):
    monitor = Monitor.objects.get(project=project, kind=kind)
    monitor.thresholds = thresholds
    monitor.save()
    return monitor_run(monitor, project, at)


def test_it_adds_to_the_buckets_counters_from_concurrent_batches(project, monkeypatch):
    fetched = {("project", "", "fetch_ok"): 3, ("project", "", "fetch_failed"): 1, ("project", "", "error:http_500"): 1}
    count(project, timezone.now(), fetched, monkeypatch)
    count(project, timezone.now(), fetched, monkeypatch)
    figures = health_figures(project.id)
    assert figures["fetches"] == 8 and figures["fetch_success_rate"] == 0.75
    assert figures["errors_by_code"] == {"http_500": 2}


def test_it_alerts_on_a_field_that_falls_below_its_baseline_and_recovers(project, monkeypatch):
    for minute in range(5):
        count(project, T0 + timedelta(minutes=minute), products(4, 4), monkeypatch)
    assert run(project, "template_changed", T0 + timedelta(minutes=5), min_pages=4) == (0, 0)
    count(project, T0 + timedelta(minutes=6), products(4, 0), monkeypatch)
    assert run(project, "template_changed", T0 + timedelta(minutes=6), min_pages=4) == (1, 0)
    alert = Alert.objects.get(project=project, resolved_at=None)
    assert alert.subject == "rule:products field 'price'"
    assert "rule set products" in alert.message and alert.evidence["baseline"] == 1
    assert project_health(project.id)["status"] == "failing"
    for minute in (7, 8):  # still broken: the open alert keeps the baseline it fell from
        count(project, T0 + timedelta(minutes=minute), products(4, 0), monkeypatch)
        assert run(project, "template_changed", T0 + timedelta(minutes=minute), min_pages=4) == (0, 0)
    count(project, T0 + timedelta(minutes=9), products(4, 4), monkeypatch)
    assert run(project, "template_changed", T0 + timedelta(minutes=9), min_pages=4) == (0, 1)
    assert project_health(project.id)["status"] == "ok"


def test_it_says_nothing_without_a_baseline(project, monkeypatch):
    count(project, T0, products(4, 0), monkeypatch)
    assert run(project, "template_changed", T0 + timedelta(minutes=1), min_pages=4) == (0, 0)


def test_a_thresholds_problem_is_named():
    assert "no threshold 'minute'" in thresholds_problem("site_down", {"minute": 3})
    assert "must be a number" in thresholds_problem("site_down", {"minutes": "3"})
    assert thresholds_problem("site_down", {"minutes": 3}) is None


@pytest.fixture
def api(django_user_model):
    from django.contrib.auth.models import Group
    from rest_framework.test import APIClient

    user = django_user_model.objects.create_user("ops", password="not-used")
    user.groups.add(Group.objects.get(name="operator"))
    user.user_permissions.add(*_perms("console.view_all_projects"))
    client = APIClient()
    client.force_authenticate(user)
    return client


def _perms(*names):
    from django.contrib.auth.models import Permission

    return [Permission.objects.get(content_type__app_label=n.split(".")[0], codename=n.split(".")[1]) for n in names]


def test_the_api_reads_health_and_an_operator_changes_thresholds(project, api, monkeypatch):
    count(project, timezone.now(), {("project", "", "fetch_ok"): 3, ("project", "", "fetch_failed"): 1}, monkeypatch)
    health = api.get("/api/projects/watched/health/").json()
    assert health["status"] == "ok" and health["figures"]["fetch_success_rate"] == 0.75
    assert api.get("/api/projects/watched/health/?hours=abc").status_code == 400

    monitor = api.get("/api/monitors/?project=watched&kind=site_down").json()["results"][0]
    assert monitor["in_effect"] == {"minutes": 3, "min_failures": 3}
    refused = api.patch(f"/api/monitors/{monitor['id']}/", {"thresholds": {"minute": 5}}, format="json")
    assert refused.status_code == 400 and "no threshold 'minute'" in str(refused.json())
    changed = api.patch(f"/api/monitors/{monitor['id']}/", {"thresholds": {"minutes": 5}}, format="json")
    assert changed.status_code == 200 and changed.json()["in_effect"] == {"minutes": 5, "min_failures": 3}
    assert Monitor.objects.get(id=monitor["id"]).thresholds == {"minutes": 5}


def test_the_api_lists_open_alerts(project, api, monkeypatch):
    for minute in range(3):
        count(project, T0 + timedelta(minutes=minute), products(4, 4), monkeypatch)
    count(project, T0 + timedelta(minutes=4), products(4, 0), monkeypatch)
    run(project, "template_changed", T0 + timedelta(minutes=5), min_pages=4)
    alerts = api.get("/api/alerts/?project=watched&open=true").json()["results"]
    assert [a["subject"] for a in alerts] == ["rule:products field 'price'"]
    assert alerts[0]["monitor"] == "template_changed" and alerts[0]["evidence"]["value"] == 0


def test_a_condition_back_within_the_cooldown_is_not_announced_until_it_ends(project):
    from console.health.notify import alerts_announce
    from console.models import Job

    def ended(state: str, at):
        Job.objects.create(project=project, trigger="admin", state=state, finished_at=at)
        return run(project, "job_failed", at)

    assert ended("failed", T0) == (1, 0)
    assert alerts_announce(now=T0) == 1
    assert ended("succeeded", T0 + timedelta(minutes=1)) == (0, 1)
    assert alerts_announce(now=T0 + timedelta(minutes=1)) == 1, "the recovery"
    assert ended("failed", T0 + timedelta(minutes=2)) == (1, 0), "a new firing, a new row"
    assert alerts_announce(now=T0 + timedelta(minutes=2)) == 0, "within the 30 minutes' cooldown"
    again = Alert.objects.get(project=project, resolved_at=None)
    assert again.notify_after == T0 + timedelta(minutes=31)
    assert alerts_announce(now=T0 + timedelta(minutes=31)) == 1, "still failing when the cooldown ended"


def test_owed_work_without_a_worker_and_a_blocked_host_alert_and_recover(project, monkeypatch):
    from console.models import WorkerBeat
    from crawl.models import Host
    from tests.console.test_admin_console import add_page

    page = add_page(project, "http://shop.test/a", "queued", next_fetch_at=T0 - timedelta(hours=1))
    count(project, timezone.now(), {("host", "shop.test", "fetch_ok"): 1}, monkeypatch)
    Host.objects.create(host="shop.test", blocked=True, blocked_reason="asked us to stop")
    now = timezone.now()
    assert run(project, "no_worker", now) == (1, 0)
    assert run(project, "host_backoff", now) == (1, 0)
    assert run(project, "zero_throughput", now, minutes=10) == (1, 0)
    subjects = set(Alert.objects.filter(resolved_at=None).values_list("subject", "message"))
    assert ("stage fetch", "watched: 1 rows owe the fetch stage and no worker consumes the 'fetch' queue") in subjects
    assert ("host shop.test", "watched: shop.test is blocked (asked us to stop)") in subjects

    WorkerBeat.objects.create(name="fetch@box", queues="fetch,control")
    Host.objects.filter(host="shop.test").update(blocked=False)
    page.delete()
    assert run(project, "no_worker", now) == (0, 1)
    assert run(project, "host_backoff", now) == (0, 1)
    assert run(project, "zero_throughput", now, minutes=10) == (0, 1)


def test_a_running_job_with_owed_work_and_no_progress_is_stalled(project, monkeypatch):
    from console.models import Job
    from tests.console.test_admin_console import add_page

    job = Job.objects.create(project=project, trigger="admin", state="running", started_at=T0)
    Project.objects.filter(id=project.id).update(job_id=job.id)
    project.refresh_from_db()
    add_page(project, "http://shop.test/a", "queued")
    assert run(project, "job_stalled", timezone.now(), minutes=10) == (1, 0)
    assert "job " + str(job.id) + " stalled: 1 rows owed" in Alert.objects.get(resolved_at=None).message
    count(project, timezone.now(), {("project", "", "fetch_ok"): 1}, monkeypatch)
    assert run(project, "job_stalled", timezone.now(), minutes=10) == (0, 1)


def test_metrics_carry_the_health_figures(project, admin_client, monkeypatch):
    count(project, timezone.now(), {("project", "", "fetch_ok"): 3, ("project", "", "fetch_failed"): 1}, monkeypatch)
    count(project, timezone.now(), products(4, 2), monkeypatch)
    text = admin_client.get("/metrics").content.decode()
    assert 'crawlhub_health_fetch_success_ratio{project="watched"} 0.75' in text
    assert 'crawlhub_health_field_coverage{field="price",project="watched",rule_set="rule:products"} 0.5' in text
    assert 'crawlhub_health_items_per_page{project="watched",rule_set="rule:products"} 1.0' in text
    assert 'crawlhub_health_status{project="watched"} 0.0' in text


def test_a_refused_notification_keeps_none_of_its_targets_secrets_in_the_alert_or_the_log(project, caplog):
    """Issue 47, point 2: Apprise's privacy URL keeps custom headers (+), payload extras (:) and form
    fields (-); the alert's error and the worker log keep none of them, nor the password or path."""
    from console.health.models import NotificationTarget
    from console.health.notify import alerts_announce
    from console.models import Job
    from tests.servers import Site, SiteServer

    secrets = ("pw-s3cret", "path-s3cret", "hdr-s3cret", "extra-s3cret", "form-s3cret")
    with SiteServer(Site(default=(500, {"Content-Type": "text/plain"}, b"refused"))) as receiver:
        host = receiver.url.removeprefix("http://")
        url = (
            f"json://me:pw-s3cret@{host}/hook/path-s3cret"
            "?+Authorization=Bearer%20hdr-s3cret&:key=extra-s3cret&-field=form-s3cret"
        )
        NotificationTarget.objects.create(project=project, name="hook", url=url)
        Job.objects.create(project=project, trigger="admin", state="failed", finished_at=T0)
        run(project, "job_failed", T0)
        caplog.set_level("INFO")
        assert alerts_announce(now=T0) == 1
        assert receiver.requests, "the target was tried"
    error = Alert.objects.get(project=project).notify_error
    assert f"json://me:***@{host}/***" in error
    assert not [s for s in secrets if s in error or s in caplog.text]
