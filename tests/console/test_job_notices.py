"""Acceptance: what the team hears, on real crawls (real workers, a real site, a JSON receiver reached
through an Apprise json:// URL and a signed webhook receiver, all on loopback): every job's end
once with its figures; a rule of the user's own that fires once and recovers once; non-urgent
messages that wait for a target's quiet hours to end while urgent ones go at once."""

from datetime import timedelta

import pytest
from django.utils import timezone

from console.health.models import Alert, HeldNotice, Monitor, NotificationTarget
from console.health.monitors import monitors_ensure, monitors_tick
from console.health.notify import held_send
from console.models import Job
from console.runs import jobs
from crawl.services.projects import project_get_or_create
from scrape.models import RuleSet
from sinks.models import Sink
from tests.alert_receiver import JsonReceiver
from tests.conftest import run_manage
from tests.console.test_monitors import HTML, RULES, recrawl_and_wait, shop, start_workers, wait_for
from tests.servers import Site, SiteServer
from tests.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.integration
SECRET = "s" * 32


def announced(project, team: JsonReceiver, night: JsonReceiver, *, job_ends: str = "all") -> None:
    """The project's targets: the team's, and one whose quiet hours hold now (an hour each way)."""
    now = timezone.now()
    project.notify_job_end = job_ends
    project.save(update_fields=["notify_job_end"])
    NotificationTarget.objects.create(project=project, name="team", url=team.apprise_url)
    NotificationTarget.objects.create(
        project=project,
        name="on call at night",
        url=night.apprise_url,
        quiet_from=(now - timedelta(hours=1)).time(),
        quiet_until=(now + timedelta(hours=1)).time(),
    )
    monitors_ensure([project.id])
    Monitor.objects.filter(project=project).update(cooldown_minutes=0)


def crawl(project, url: str, env: dict) -> Job:
    run_manage(["crawl", url, "--workers", "0", "--project", project.slug], env)
    return Job.objects.filter(project=project).order_by("-id").first()


def ended(receiver: JsonReceiver, job: Job) -> list[dict]:
    """The receiver's job-ended messages of `job` (not the failed-job alert, which names it too)."""
    title = f"[crawlhub] {job.project.name}: job {job.id} {job.state}"
    return [m for m in receiver.messages() if m["title"] == title]


def quiet_hours_end() -> None:
    """The held messages go out at the end of the quiet hours (the tick at that moment)."""
    ends = HeldNotice.objects.order_by("send_after").values_list("send_after", flat=True).first()
    assert ends is not None and ends > timezone.now() + timedelta(minutes=50), "held until the hours end"
    assert held_send(now=ends - timedelta(seconds=1)) == 0
    held_send(now=ends)


def test_every_job_announces_its_end_once_with_its_figures(workers, worker_env):
    site = shop()
    with JsonReceiver() as team, JsonReceiver() as night, WebhookReceiver(SECRET) as hook, SiteServer(site) as server:
        project = project_get_or_create(name="ends watch", allow_private=True, download_media=False)
        announced(project, team, night)
        RuleSet.objects.create(project=project, name="products", spec=RULES)
        Sink.objects.create(project=project, name="hook", kind="http", items=False,
                            config={"url": hook.url, "secret": SECRET})  # fmt: skip
        start_workers(workers)

        good = crawl(project, f"{server.url}/", worker_env)
        bad = crawl(project, f"{server.url}/gone.html", worker_env)
        assert (good.state, bad.state) == (Job.State.SUCCEEDED, Job.State.FAILED)
        wait_for(lambda: ended(team, good) and ended(team, bad), "two job-ended messages")
        wait_for(lambda: len(hook.records) == 2, "two job_ended events")
        monitors_tick()
        monitors_tick()
        jobs.jobs_tick()

        assert len(ended(team, good)) == 1 and len(ended(team, bad)) == 1
        assert ended(night, good) == [], "not urgent: held in the quiet hours"
        assert len(ended(night, bad)) == 1, "a failure is urgent: sent in the quiet hours"
        quiet_hours_end()
        assert len(ended(night, good)) == 1

    good_text = ended(team, good)[0]["message"]
    assert good.stats["items"] >= 6, "the six products, and the pages' own metadata items"
    expected = ("Pages: 7 done, 0 failed", f"Items: {good.stats['items']}", "Assets: 0 stored, 0 failed",
                "Errors by code: none", "Duration: ", f"/admin/console/job/{good.id}/change/")  # fmt: skip
    for line in expected:
        assert line in good_text, good_text
    bad_text = ended(team, bad)[0]["message"]
    (code,) = bad.stats["errors"]
    for line in ("Pages: 0 done, 1 failed", "Items: 0", f"Errors by code: {code} x1", f"/job/{bad.id}/change/"):
        assert line in bad_text, bad_text

    assert hook.bad_signatures == 0
    events = {r["job"]: r for r in hook.records.values()}
    assert set(events) == {good.id, bad.id} and {r["event"] for r in events.values()} == {"job_ended"}
    assert (events[good.id]["pages_done"], events[good.id]["state"]) == (7, "succeeded")
    assert events[good.id]["items"] == good.stats["items"]
    assert events[bad.id]["errors_by_code"] == {code: 1} and events[bad.id]["pages_failed"] == 1
    assert events[good.id]["seconds"] > 0 and events[good.id]["url"].endswith(f"/job/{good.id}/change/")


def test_a_rule_of_ones_own_fires_once_and_recovers_once_and_waits_for_quiet_hours(workers, worker_env):
    site = shop()
    with JsonReceiver() as team, JsonReceiver() as night, SiteServer(site) as server:
        project = project_get_or_create(name="rule watch", allow_private=True, download_media=False)
        announced(project, team, night, job_ends="off")
        RuleSet.objects.create(project=project, name="products", spec=RULES)
        Monitor.objects.create(project=project, kind=Monitor.Kind.ITEMS_PER_RUN, name="few products",
                               watch="products", threshold=10, cooldown_minutes=0)  # fmt: skip
        start_workers(workers)

        crawl(project, f"{server.url}/", worker_env)  # 6 products: under 10
        fired = wait_for(lambda: team.messages("few products"), "the rule's alert")
        assert len(fired) == 1 and "made 6 items of rule set products, under 10" in fired[0]["message"]
        assert night.messages("few products") == [], "a rule is not urgent: it waits for the quiet hours"

        more = Site(files=dict(site.files))
        links = "".join(f'<a href="/p{n}.html">{n}</a>' for n in range(12))
        more.files["/"] = (200, HTML, f"<html><body>{links}</body></html>".encode())
        for n in range(6, 12):
            more.files[f"/p{n}.html"] = (200, HTML, site.files["/p0.html"][2].replace(b"Product 0", f"P{n}".encode()))
        site.files.update(more.files)
        recrawl_and_wait(project)  # 12 products
        back = wait_for(lambda: team.messages("recovered"), "the rule's recovery")
        monitors_tick()
        monitors_tick()
        assert night.messages("few products") == []
        quiet_hours_end()
        held = night.messages("few products")
    assert len(back) == 1 and "few products" in back[0]["title"] and "back to normal" in back[0]["message"]
    assert len(team.messages("few products")) == 2, "one alert, one recovery"
    alert = Alert.objects.get(project=project, monitor__kind=Monitor.Kind.ITEMS_PER_RUN)
    assert alert.subject == "rule set products" and alert.resolved_at is not None
    assert [m["type"] for m in held] == ["failure", "success"], "both, in order, once the quiet hours ended"
