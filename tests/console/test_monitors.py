"""Acceptance: monitors on real crawls (real workers, a real site and a real JSON webhook receiver
on loopback, reached through an Apprise json:// URL): a template that loses a required field, a
site that goes offline, a job that fails; each alerts once and says once when it recovered."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from console.health.models import Alert, HealthCounter, Monitor, NotificationTarget
from console.health.monitors import monitors_ensure, monitors_tick
from console.models import Job
from console.runs import jobs
from console.tasks import monitors_tick_task
from crawl.models import Page
from crawl.services.projects import project_get_or_create
from scrape.models import RuleSet
from tests.alert_receiver import JsonReceiver
from tests.conftest import run_manage
from tests.helpers import wait_until
from tests.servers import Site, SiteServer

pytestmark = pytest.mark.integration
HTML = {"Content-Type": "text/html; charset=utf-8"}
PRODUCTS = range(6)
RULES = {
    "url_patterns": ["/p[0-9]+[.]html"],
    "item_selector": "div.product",
    "fields": {"title": {"css": "h2.title"}, "price": {"css": "span.price"}},
    "required": ["title", "price"],
}


def shop(*, with_price: bool = True) -> Site:
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    links = "".join(f'<a href="/p{n}.html">{n}</a>' for n in PRODUCTS)
    site.files["/"] = (200, HTML, f"<html><body>{links}</body></html>".encode())
    template(site, with_price=with_price)
    return site


def template(site: Site, *, with_price: bool) -> None:
    """The product pages; the redesign drops the price's element."""
    for n in PRODUCTS:
        price = f'<span class="price">{n}.50</span>' if with_price else f"<em>{n}.50</em>"
        body = f'<html><body><div class="product"><h2 class="title">Product {n}</h2>{price}</div></body></html>'
        site.files[f"/p{n}.html"] = (200, HTML, body.encode())


def monitored(name: str, receiver: JsonReceiver, **thresholds) -> object:
    project = project_get_or_create(name=name, allow_private=True, download_media=False)
    NotificationTarget.objects.create(project=project, name="team webhook", url=receiver.apprise_url)
    monitors_ensure([project.id])
    for kind, values in thresholds.items():
        Monitor.objects.filter(project=project, kind=kind).update(thresholds=values, cooldown_minutes=0)
    return project


def start_workers(workers) -> None:
    for stage in ("fetch", "extract", "download"):
        workers.start(stage, stage)


def recrawl_and_wait(project) -> Job:
    job, _ = jobs.crawl_recrawl(project=project, trigger=Job.Trigger.API)
    return wait_for(lambda: _ended(job), "the recrawl job to end")


def _ended(job: Job) -> Job | None:
    jobs.jobs_tick()
    job.refresh_from_db()
    return job if not job.active else None


def wait_for(check, what: str, timeout: float = 60.0):
    """Poll `check` (ticking the monitors on the control queue, as beat would) until it answers."""

    def ticked():
        jobs.jobs_tick()
        monitors_tick_task.delay()
        return check()

    return wait_until(ticked, timeout=timeout, interval=0.3, what=lambda: f"{what}; {_seen()}")


def _seen() -> str:
    """What the database holds, for a failure's message."""
    pages = Page.objects.values_list("url", "state", "error_code", "next_fetch_at")
    alerts = Alert.objects.values_list("subject", "message", "resolved_at", "notified_at", "notify_error")
    counters = HealthCounter.objects.values_list("bucket", "scope", "key", "metric", "value")
    return f"pages {list(pages)}; alerts {list(alerts)}; counters {list(counters)}"


def new_bucket() -> None:
    """Wait until the clock is past the newest health bucket, so the next crawl's counters are a
    bucket of their own: the template monitor compares the newest buckets with the earlier ones
    (here a bucket is 1 s, and a crawl of the shop can take less)."""
    step = timedelta(seconds=settings.CONSOLE_HEALTH_BUCKET_SECONDS)
    newest = HealthCounter.objects.order_by("-bucket").values_list("bucket", flat=True).first()
    wait_for(lambda: newest is None or timezone.now() >= newest + step, "a new health bucket", timeout=10)


def settled(receiver: JsonReceiver) -> None:
    """Two more ticks run here to the end: whatever they would send has been sent."""
    monitors_tick()
    monitors_tick()


def test_a_template_change_alerts_once_naming_the_rule_set_and_field_and_recovers_once(workers, worker_env):
    site = shop()
    with JsonReceiver() as receiver, SiteServer(site) as server:
        project = monitored("shop watch", receiver, template_changed={"min_pages": 3})
        RuleSet.objects.create(project=project, name="products", spec=RULES)
        start_workers(workers)
        done = run_manage(["crawl", f"{server.url}/", "--workers", "0", "--project", project.slug], worker_env)
        assert done.returncode == 0, done.stdout + done.stderr

        new_bucket()
        template(site, with_price=False)
        recrawl_and_wait(project)
        fired = wait_for(lambda: receiver.messages("template changed"), "the template alert")
        assert len(fired) == 1
        alert = fired[0]
        assert alert["type"] == "failure"
        for named in ("shop watch", "rule set products", "field 'price'", f"?project={project.id}"):
            assert named in alert["title"] + alert["message"]
        assert receiver.messages("recovered") == []

        new_bucket()
        template(site, with_price=True)
        recrawl_and_wait(project)
        back = wait_for(lambda: receiver.messages("recovered"), "the recovery")
        settled(receiver)
    assert len(back) == 1 and "field 'price'" in back[0]["title"] + back[0]["message"]
    assert back[0]["type"] == "success"
    assert len(receiver.messages("template changed")) == 2, "one alert, one recovery: nothing more"
    row = Alert.objects.get(project=project, monitor__kind="template_changed")
    assert row.evidence["rule_set"] == "products" and row.evidence["metric"] == "field:price"
    assert row.evidence["value"] == 0 and row.evidence["baseline"] == 1
    assert row.resolved_at is not None


def test_a_site_going_offline_alerts_once_and_recovers_once(workers, worker_env):
    env = {**worker_env, "CRAWL_RETRY_LONG_SECONDS": "1", "CRAWL_RETRY_MAX_SECONDS": "2", "CRAWL_MAX_ATTEMPTS": "2"}
    workers.env = env
    site = shop()
    with JsonReceiver() as receiver:
        project = monitored("uptime watch", receiver, site_down={"minutes": 0.05, "min_failures": 3})
        start_workers(workers)
        with SiteServer(site, keep_alive=False) as server:  # no kept connection outlives it
            port = server.port
            done = run_manage(["crawl", f"{server.url}/", "--workers", "0", "--project", project.slug], env)
            assert done.returncode == 0, done.stdout + done.stderr
        jobs.crawl_recrawl(project=project, trigger=Job.Trigger.API)  # the site is offline now
        down = wait_for(lambda: receiver.messages("is down"), "the site-down alert")
        assert len(down) == 1
        assert "uptime watch" in down[0]["title"] and "127.0.0.1" in down[0]["message"]
        assert "failing_url: http://127.0.0.1" in down[0]["message"]

        with SiteServer(site, port=port, keep_alive=False):
            back = wait_for(lambda: receiver.messages("recovered"), "the site's recovery")
            settled(receiver)
    assert len(back) == 1 and "site down" in back[0]["title"]
    assert len(receiver.messages("site down")) == 2, "one alert, one recovery"
    assert "back to normal after" in back[0]["message"]
    assert "is down" not in back[0]["message"] and "errors_by_code" not in back[0]["message"], "not the failing figures"


def test_a_failed_job_alerts_once_with_a_failing_url_and_recovers_with_the_next_good_job(workers, worker_env):
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    with JsonReceiver() as receiver, SiteServer(site) as server:
        project = monitored("job watch", receiver)
        start_workers(workers)
        failed = run_manage(
            ["crawl", f"{server.url}/gone.html", "--workers", "0", "--project", project.slug], worker_env
        )
        assert Job.objects.get(project=project).state == Job.State.FAILED, failed.stdout + failed.stderr
        fired = wait_for(lambda: receiver.messages("job failed ("), "the failed-job alert")
        assert len(fired) == 1
        assert "job watch" in fired[0]["title"] and f"{server.url}/gone.html" in fired[0]["message"]

        site.files["/gone.html"] = (200, HTML, b"<html><body>back</body></html>")
        jobs.crawl_retry_failed(project=project, trigger=Job.Trigger.API)
        back = wait_for(lambda: receiver.messages("recovered"), "the recovery")
        settled(receiver)
    assert len(back) == 1 and "job failed" in back[0]["title"]
    assert len(receiver.messages("job failed")) == 2
