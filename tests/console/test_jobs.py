"""Jobs: every run is one. They end by themselves when their work is drained, a cancel loses nothing
and can be resumed, retry-failed makes a new job, their counts are their own rows', their messages
carry their id, and the console warns when owed work has no worker to take it."""

import base64
import io
import json
import logging
import os
import re
import subprocess
import sys
import uuid
import zlib
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

import crawlhub
from console.dashboard import dashboard_snapshot, overview_snapshot
from console.management.commands.crawl import Command as CrawlCommand
from console.models import Job, JobLogEntry, WorkerBeat
from console.runs import jobs, steering
from console.runs.beat import scheduler_heartbeat
from console.runs.job_runs import job_start
from console.selectors import project_progress
from crawl.frontier.assets import assets_claim, assets_ready
from crawl.frontier.pages import pages_claim_for_fetch
from crawl.frontier.reaper import reap
from crawl.frontier.stages import job_scope, publish_extract
from crawl.models import MediaAsset, Page, PageContent, Project, Seed
from crawlproject.celery import app
from scrape.services import pages_extract
from tests.conftest import beat_stop, last_json_line, migrate_embedded, run_manage
from tests.console.test_admin_console import add_form_data, add_page
from tests.helpers import wait_until

T = Job.Trigger.COMMAND


@pytest.fixture
def project(make_project):
    return make_project(name="jobs", allow_private=True)


def stamp(job: Job, *pages: Page) -> None:
    Page.objects.filter(id__in=[p.id for p in pages]).update(job_id=job.id)


def test_a_job_starts_with_its_first_claim_and_ends_by_itself_when_drained(project):
    job, created = jobs.job_begin(project=project, kind=Job.Kind.CRAWL, trigger=T)
    assert created and job.state == "queued"
    again, created_again = jobs.job_begin(project=project, kind=Job.Kind.RECRAWL, trigger=T)
    assert (again.id, created_again) == (job.id, False), "a second start joins the running job"
    done = add_page(project, "http://a.test/1", "done", content_length=100)
    owed = add_page(project, "http://a.test/2", "queued")
    stamp(job, done)
    assert jobs.jobs_tick() == {"started": 1, "ended": 0}, "owed work keeps it running"
    job.refresh_from_db()
    assert job.state == "running" and job.started_at is not None
    Page.objects.filter(id=owed.id).update(state="failed", error_code="http_404", job_id=job.id)
    assert jobs.jobs_tick()["ended"] == 1
    job.refresh_from_db()
    project.refresh_from_db()
    assert (job.state, job.message) == ("succeeded", "1 pages done, 1 failed")
    assert job.stats["pages_done"] == 1 and job.stats["errors"] == {"http_404": 1} and job.stats["bytes"] == 100
    assert project.job_id is None, "the project runs no job any more"


def test_a_jobs_time_runs_from_its_start_to_its_last_finish_and_its_rate_over_that_time(project):
    now = timezone.now()
    job, _ = jobs.job_begin(project=project, kind=Job.Kind.CRAWL, trigger=T)
    Job.objects.filter(id=job.id).update(created_at=now - timedelta(seconds=60))
    pages = [add_page(project, f"http://a.test/{i}", "done", fetch_ms=500) for i in range(15)]
    stamp(job, *pages)
    for i, page in enumerate(pages):  # fetched from 50 s ago, one every half second: 7 s of work
        at = now - timedelta(seconds=50 - i / 2)
        Page.objects.filter(id=page.id).update(fetched_at=at, updated_at=at)
    assert jobs.jobs_tick() == {"started": 1, "ended": 1}, "the tick comes seconds after the work"
    job.refresh_from_db()
    assert job.started_at == now - timedelta(seconds=50.5), "the first fetch began fetch_ms before it ended"
    assert job.finished_at == now - timedelta(seconds=43), "the last row finished"
    # From its start (a worker's start is the user's wait too: issue 48, point 10) to its last finish.
    assert (job.stats["seconds"], job.stats["pages_per_second"]) == (17.0, 0.88)


def test_a_job_whose_rows_were_claimed_reads_as_running_before_the_tick_writes_it(project, admin_client):
    job, _ = jobs.job_begin(project=project, kind=Job.Kind.CRAWL, trigger=T)
    Job.objects.filter(id=job.id).update(created_at=timezone.now() - timedelta(seconds=10))
    job.refresh_from_db()
    fetched = timezone.now() - timedelta(seconds=3)
    pages = [add_page(project, f"http://a.test/{i}", "done", fetched_at=fetched, fetch_ms=0) for i in range(3)]
    stamp(job, *pages)
    add_page(project, "http://a.test/owed", "queued")
    shown = admin_client.get(f"/api/jobs/{job.id}/").json()
    assert (shown["state"], shown["started_at"]) == ("running", fetched.isoformat().replace("+00:00", "Z"))
    assert shown["counts"]["pages_done"] == 3 and shown["counts"]["seconds"] >= 3
    listed = json.loads(call_jobs_json("jobs"))
    assert (listed["state"], listed["started_at"]) == ("running", fetched.isoformat())
    assert Job.objects.get(id=job.id).state == "queued", "a read writes nothing"


def call_jobs_json(project: str) -> str:
    out = io.StringIO()
    call_command("jobs", project, "--json", stdout=out)
    return out.getvalue().splitlines()[0]


def test_a_job_whose_every_page_failed_failed(project):
    job, _ = jobs.job_begin(project=project, kind=Job.Kind.CRAWL, trigger=T)
    stamp(job, add_page(project, "http://a.test/x", "failed", error_code="blocked_address"))
    MediaAsset.objects.create(project=project, url="http://a.test/x.jpg", url_key="k", state="failed",
                              error_code="http_404", job_id=job.id)  # fmt: skip
    jobs.jobs_tick()
    job.refresh_from_db()
    assert (job.state, job.message) == ("failed", "every page failed (1); see the failures in its report")
    assert (job.stats["errors"], job.stats["asset_errors"]) == ({"blocked_address": 1}, {"http_404": 1})


def test_pages_robots_txt_forbids_do_not_make_a_job_failed(project):
    job, _ = jobs.job_begin(project=project, kind=Job.Kind.CRAWL, trigger=T)
    forbidden = [
        add_page(project, f"http://a.test/private/{n}", "failed", error_code="robots_disallowed") for n in (1, 2)
    ]
    stamp(job, *forbidden)
    jobs.jobs_tick()
    job.refresh_from_db()
    assert (job.state, job.message) == ("succeeded", "0 pages done, 2 failed (2 forbidden by robots.txt)")


def test_retry_failed_makes_a_new_job_of_the_failures_only(project):
    first, _ = jobs.job_begin(project=project, kind=Job.Kind.CRAWL, trigger=T)
    bad = add_page(project, "http://a.test/bad", "failed", error_code="http_500", attempts=3)
    good = add_page(project, "http://a.test/good", "done")
    other = add_page(project, "http://a.test/older", "failed", error_code="http_500")  # another run's failure
    stamp(first, bad, good)
    jobs.jobs_tick()
    first.refresh_from_db()
    assert first.state == "succeeded"
    retry, queued = jobs.job_retry_failed(job=first, trigger=T)
    assert retry.id != first.id and retry.retry_of_id == first.id and retry.kind == "retry"
    assert queued == 1
    assert Page.objects.get(id=bad.id).state == "queued" and Page.objects.get(id=bad.id).attempts == 0
    assert Page.objects.get(id=other.id).state == "failed", "only the job's own failures"
    assert Project.objects.get(id=project.id).job_id == retry.id


def test_a_scheduled_tick_that_queues_pages_is_a_job(project):
    from crawl.tasks import dispatch_task

    assert dispatch_task(project_id=project.id) == 0
    assert not Job.objects.exists(), "a tick that queued nothing is no job"
    due = add_page(project, "http://a.test/due", "done", next_fetch_at=timezone.now() - timedelta(minutes=1))
    assert dispatch_task(project_id=project.id) == 1
    (job,) = Job.objects.all()
    assert (job.kind, job.trigger, job.state) == ("scheduled", "schedule", "queued")
    assert Project.objects.get(id=project.id).job_id == job.id
    assert Page.objects.get(id=due.id).state == "queued"


def test_pause_resume_and_cancel_keep_the_rows(project):
    job, _ = steering.crawl_start(project=project, trigger=T)
    queued = add_page(project, "http://a.test/q", "queued")
    assert steering.job_pause(job=job)
    assert Project.objects.get(id=project.id).status == "paused"
    jobs.jobs_tick()
    assert Job.objects.get(id=job.id).state == "paused", "a paused job does not end"
    assert steering.job_resume(job=job) and Project.objects.get(id=project.id).status == "active"
    assert steering.job_cancel(job=job)
    job.refresh_from_db()
    assert job.state == "cancelled" and job.finished_at is not None and "1 pages left owed" in job.message
    assert Page.objects.get(id=queued.id).state == "queued", "cancel drops no row"
    assert not steering.job_cancel(job=job), "an ended job cannot be cancelled"
    restarted, _ = steering.crawl_start(project=project, trigger=T)
    assert restarted.id != job.id and Project.objects.get(id=project.id).status == "active"


def test_seeds_added_at_every_door_are_crawled_as_a_job(admin_client, broker):
    """Issue 47, point 11: every fetch belongs to a job. Seeds added to an active project (a new
    one is active) through the API, the admin, the addseeds command or the Python API open a job
    (or join the running one), listed in jobs/?project= and ended by the job machinery; a project
    created "paused" stays paused and crawls nothing until Start, which runs a job."""
    created = admin_client.post(
        "/api/projects/", {"name": "doors", "allow_private": True}, content_type="application/json"
    )
    assert created.status_code == 201 and created.json()["status"] == "active"

    def added(door, slug: str = "doors") -> Job:
        door()
        (page,) = Page.objects.filter(project__slug=slug, job_id=None)
        _token, claimed = pages_claim_for_fetch([page.id])
        job = Job.objects.get(id=Project.objects.get(slug=slug).job_id)
        assert [p.job_id for p in claimed] == [job.id], "the fetch belongs to the job"
        Page.objects.filter(id=page.id).update(state="done")
        jobs.jobs_tick()
        job.refresh_from_db()
        assert (job.kind, job.state) == ("crawl", "succeeded"), "the machinery ends it when nothing is owed"
        return job

    seed = {"project": "doors", "url": "http://127.0.0.1:9/api"}
    api = added(lambda: admin_client.post("/api/seeds/", seed, content_type="application/json"))
    command = added(lambda: call_command("addseeds", "doors", "http://127.0.0.1:9/cmd", stdout=io.StringIO()))
    python = added(lambda: crawlhub.add_seeds(Project.objects.get(slug="doors"), ["http://127.0.0.1:9/py"]))
    listed = admin_client.get("/api/jobs/", {"project": "doors"}).json()
    listed = listed["results"] if isinstance(listed, dict) else listed
    assert sorted((j["id"], j["trigger"]) for j in listed) == [
        (api.id, "api"),
        (command.id, "command"),
        (python.id, "command"),
    ]
    data = add_form_data(admin_client.get("/admin/crawl/project/add/"))
    data |= {"name": "pasted", "slug": "pasted", "allow_private": "on", "bulk_seeds": "http://127.0.0.1:9/admin"}
    assert added(lambda: admin_client.post("/admin/crawl/project/add/", data), "pasted").trigger == "admin"

    paused = admin_client.post("/api/projects/", {"name": "held", "status": "paused"}, content_type="application/json")
    assert paused.status_code == 201 and paused.json()["status"] == "paused"
    held = Project.objects.get(slug="held")
    admin_client.post("/api/seeds/", {"project": "held", "url": "http://a.test/"}, content_type="application/json")
    (page,) = Page.objects.filter(project=held)
    assert (pages_claim_for_fetch([page.id])[1], Job.objects.filter(project=held).count()) == ([], 0)
    job, _ = steering.crawl_start(project=held, trigger=T)
    assert [p.job_id for p in pages_claim_for_fetch([page.id])[1]] == [job.id]


def test_a_cancelled_job_leaves_its_fetched_pages_and_assets_owed(project):
    """Issue 47, point 15: after Cancel no stage hands out the job's work, extraction and downloads
    included: its fetched page is not extracted and marked done under it, and its message and
    figures say what it left; Start extracts it as the next job."""
    job, _ = steering.crawl_start(project=project, trigger=T)
    fetched = add_page(project, "http://a.test/f", "fetched", status_code=200, content_type="text/html")
    PageContent.objects.create(page=fetched, headers={}, body=zlib.compress(b"<title>F</title><p>f</p>"))
    asset = MediaAsset.objects.create(project=project, url="http://a.test/i.jpg", url_key="1" * 64)
    stamp(job, fetched, add_page(project, "http://a.test/d", "done"))
    assert steering.job_cancel(job=job)
    job.refresh_from_db()
    assert "1 pages left owed" in job.message and job.stats["pages_done"] == 1
    pages_extract(page_ids=[])
    pages_extract(page_ids=[fetched.id])
    assert Page.objects.get(id=fetched.id).state == "fetched", "a cancelled job extracts nothing more"
    assert assets_ready(limit=10) == [] and assets_claim([asset.id])[1] == []
    assert jobs.job_counts(job)["pages_done"] == job.stats["pages_done"] == 1, "its figures stay true"
    again, _ = steering.crawl_start(project=project, trigger=T)
    pages_extract(page_ids=[])
    assert Page.objects.values_list("state", "job_id").get(id=fetched.id) == ("done", again.id)


def test_task_messages_carry_the_job(project, broker):
    """The messages that carry ids (the reaper's, one row each) name the job (wake-ups serve every
    project: their rows' jobs scope what they write)."""
    page = add_page(project, "http://a.test/m", "queued")
    client = redis.Redis.from_url(broker)
    with job_scope(4242):
        publish_extract([page.id], batch=1)
    message = json.loads(client.lpop("extract"))
    body = json.loads(base64.b64decode(message["body"]))
    assert (body[0], body[1]) == ([[page.id]], {"job": 4242}), "args and kwargs of scrape.extract_batch"
    assert message["headers"]["kwargsrepr"] == "{'job': 4242}", "what Flower shows"


def test_the_job_log_keeps_a_jobs_warnings_up_to_its_limit(project, settings):
    settings.CONSOLE_JOB_LOG_LIMIT = 3
    job, _ = jobs.job_begin(project=project, kind=Job.Kind.CRAWL, trigger=T)
    logger = logging.getLogger("crawlhub.test-joblog")  # the handler the console installs on the root logger
    with job_scope(job.id):
        for i in range(5):
            logger.warning("page %d failed", i, extra={"url": f"http://a.test/{i}", "code": "http_500"})
        logger.info("not kept: below WARNING")
    logger.warning("not kept: no job")
    entries = list(JobLogEntry.objects.filter(job=job).values_list("message", "url", "code"))
    assert entries == [(f"page {i} failed", f"http://a.test/{i}", "http_500") for i in range(3)]


def test_the_overview_warns_when_owed_work_has_no_worker(project, admin_client):
    add_page(project, "http://a.test/owed", "queued")
    snapshot = overview_snapshot()
    assert any("no worker consumes the 'fetch' queue" in w for w in snapshot["warnings"]), snapshot["warnings"]
    (row,) = [r for r in snapshot["projects"] if r["slug"] == "jobs"]
    assert row["owed"] == 1 and row["actions"] == ["start"]
    assert any("No scheduler (celery beat) is running (has never run)" in w for w in snapshot["warnings"])
    WorkerBeat.objects.create(name="w1@test", queues="fetch,extract,download,control")
    scheduler_heartbeat()
    assert not overview_snapshot()["warnings"], "a live worker on the queue and a running beat: no warning"
    assert [w["name"] for w in overview_snapshot()["workers"]] == ["w1@test"], "beat is not a worker"
    WorkerBeat.objects.update(seen_at=timezone.now() - timedelta(minutes=5))
    warnings = overview_snapshot()["warnings"]
    assert len(warnings) == 2, "a worker not seen for minutes is gone, and so is a beat"
    html = admin_client.get("/admin/").content.decode()
    assert "no worker consumes the &#x27;fetch&#x27; queue" in html, "the admin index warns too"


def test_pages_waiting_out_a_retry_are_shown_with_their_reason_and_time(project, admin_client, capsys):
    due = timezone.now() + timedelta(seconds=90)
    for path in ("a", "b"):
        add_page(project, f"http://a.test/{path}", "queued", next_fetch_at=due, error_code="connect_error",
                 error_message="the host was unreachable (connect_error)")  # fmt: skip
    add_page(project, "http://a.test/c", "queued")
    expected = {"code": "connect_error", "pages": 2, "message": "the host was unreachable (connect_error)"}
    (row,) = [r for r in overview_snapshot()["projects"] if r["slug"] == "jobs"]
    assert row["retrying"] == [expected | {"next_at": due.isoformat()}]
    assert dashboard_snapshot(project)["retrying"] == row["retrying"]
    progress = admin_client.get("/api/projects/jobs/progress/").json()
    assert [(r["code"], r["pages"]) for r in progress["retrying"]] == [("connect_error", 2)]
    CrawlCommand()._progress_line(project_progress(project), 3.0)
    assert f"2 pages retrying connect_error, next at {timezone.localtime(due):%H:%M:%S}" in capsys.readouterr().err


def test_start_on_a_finished_project_offers_the_recrawls_instead_of_an_empty_job(project, admin_client):
    Seed.objects.create(project=project, url="http://a.test/")
    long_ago, later = timezone.now() - timedelta(hours=2), timezone.now() + timedelta(hours=2)
    seed = add_page(project, "http://a.test/", "done", is_seed=True, next_fetch_at=long_ago)
    other = add_page(project, "http://a.test/x", "done", next_fetch_at=later)
    last = Job.objects.create(project=project, kind="crawl", trigger=T, state="succeeded", message="2 pages done")
    control = reverse("admin-overview-control")
    refused = admin_client.post(control, {"project": project.id, "action": "start"})
    assert refused.status_code == 409 and refused.json()["offer"] == ["recrawl_due", "recrawl"]
    assert refused.json()["error"] == (
        "jobs has nothing left to crawl (2 pages done, 0 failed): "
        "recrawl what is due (1 pages) or recrawl everything (2 pages)."
    )
    api = admin_client.post("/api/projects/jobs/start/")
    assert api.status_code == 409 and api.json()["offer"]["recrawl_due"]["body"] == {"due": True}
    assert list(Job.objects.all()) == [last], "no empty job hides the last run"
    (row,) = [r for r in overview_snapshot()["projects"] if r["slug"] == "jobs"]
    assert row["job"]["id"] == last.id

    due = admin_client.post(control, {"project": project.id, "action": "recrawl_due"})
    assert due.status_code == 200 and due.json()["ok"]
    states = dict(Page.objects.filter(project=project).values_list("id", "state"))
    assert states == {seed.id: "queued", other.id: "done"}, "only what is due"
    assert Job.objects.get(id=due.json()["job"]).kind == "recrawl"


@pytest.mark.integration
def test_the_scheduler_warning_goes_within_seconds_of_beat_starting(project, worker_env, tmp_path):
    add_page(project, "http://a.test/owed", "queued")
    no_beat = "No scheduler (celery beat) is running"
    assert any(no_beat in w for w in overview_snapshot()["warnings"])

    def gone() -> bool:
        return not any(no_beat in w for w in overview_snapshot()["warnings"])

    command = [sys.executable, "-m", "celery", "-A", "crawlproject", "beat", "-l", "INFO"]
    with open(tmp_path / "beat.log", "w") as log:
        beat = subprocess.Popen([*command, "-s", str(tmp_path / "schedule")], env=worker_env, stdout=log, stderr=log)
    try:
        wait_until(gone, timeout=30, interval=0.3, what="the warning to go")
        synced = PeriodicTask.objects.exclude(last_run_at=None).values_list("last_run_at", flat=True)
        assert not [t for t in synced if t > timezone.now() - timedelta(minutes=1)], "not from last_run_at"
    finally:
        beat_stop(beat)


def test_the_overview_buttons_start_pause_and_cancel_jobs(project, admin_client):
    Seed.objects.create(project=project, url="http://127.0.0.1:9/")
    answer = admin_client.post("/admin/dashboard/control/", {"project": project.id, "action": "start"})
    assert answer.status_code == 200 and answer.json()["ok"]
    job_id = answer.json()["job"]
    assert admin_client.post("/admin/dashboard/control/", {"project": project.id, "action": "pause"}).json()["ok"]
    assert Job.objects.get(id=job_id).state == "paused"
    assert admin_client.post("/admin/dashboard/control/", {"project": project.id, "action": "cancel"}).json()["ok"]
    assert Job.objects.get(id=job_id).state == "cancelled"
    refused = admin_client.post("/admin/dashboard/control/", {"project": project.id, "action": "pause"})
    assert refused.status_code == 409
    assert admin_client.post("/admin/dashboard/control/", {"project": "x", "action": "start"}).status_code == 400


START_DOORS = {  # each door's Start as a user reaches it, and the trigger its job records
    "admin": ("admin", lambda client, p: client.post(PROJECTS, {"action": "start", "_selected_action": [p.id]})),
    "dashboard": ("admin", lambda client, p: client.post(CONTROL, {"project": p.id, "action": "start"})),
    "api": ("api", lambda client, p: client.post(f"/api/projects/{p.slug}/start/")),
    "command": ("command", lambda client, p: job_start(p, seeds={"page": []}, recrawl=False, notice=print)),
}
PROJECTS, CONTROL = "/admin/crawl/project/", "/admin/dashboard/control/"


@pytest.mark.parametrize("door", list(START_DOORS))
def test_a_start_queues_the_seeds_and_publishes_owed_pages_and_assets_whichever_door(project, admin_client, door):
    Seed.objects.create(project=project, url="http://a.test/")
    left_page = add_page(project, "http://a.test/left-over", "queued")
    left_asset = MediaAsset.objects.create(project=project, url="http://a.test/l.jpg", url_key="l" * 64, kind="image")
    trigger, start = START_DOORS[door]
    start(admin_client, project)
    (job,) = Job.objects.filter(project=project)
    assert (job.kind, job.state, job.trigger) == ("crawl", "queued", trigger)
    assert Project.objects.get(id=project.id).job_id == job.id
    seed = Page.objects.get(project=project, is_seed=True)
    published = [seed, Page.objects.get(id=left_page.id), MediaAsset.objects.get(id=left_asset.id)]
    assert [row.enqueued_at is not None for row in published] == [True, True, True]


def test_the_jobs_api_lists_filters_details_and_acts(project, admin_client):
    job, _ = jobs.job_begin(project=project, kind=Job.Kind.CRAWL, trigger=T)
    stamp(job, add_page(project, "http://a.test/f", "failed", error_code="http_404", error_message="HTTP 404"))
    jobs.jobs_tick()
    listed = admin_client.get("/api/jobs/", {"project": "jobs", "state": "failed"}).json()["results"]
    assert [j["id"] for j in listed] == [job.id] and listed[0]["counts"]["pages_failed"] == 1
    assert admin_client.get("/api/jobs/", {"state": "running"}).json()["results"] == []
    assert admin_client.get("/api/jobs/", {"state": "bogus"}).status_code == 400
    detail = admin_client.get(f"/api/jobs/{job.id}/").json()
    assert detail["failures"][0]["url"] == "http://a.test/f" and detail["failures"][0]["code"] == "http_404"
    assert admin_client.post(f"/api/jobs/{job.id}/cancel/").status_code == 409, "it has ended"
    retried = admin_client.post(f"/api/jobs/{job.id}/retry-failed/")
    assert retried.status_code == 201 and retried.json()["retry_of"] == job.id
    assert admin_client.post(f"/api/jobs/{retried.json()['id']}/cancel/").json()["state"] == "cancelled"


def fetch_wakeup_claims(log: Path) -> int:
    """Wake the fetch stage as the frontier does and wait for the fetch worker to have run that
    wake-up (its log says so): how many pages it claimed. A worker that looked for work and found
    none proves a negative that a pause could only hope for."""
    task_id = str(uuid.uuid4())
    app.send_task("crawl.fetch_batch", args=[[]], task_id=task_id)
    ran = re.compile(rf"crawl\.fetch_batch\[{task_id}\] succeeded in \S+s: (\d+)")
    found = wait_until(lambda: ran.search(log.read_text(errors="replace")), timeout=60, what="the fetch wake-up to run")
    return int(found.group(1))


@pytest.mark.integration
def test_cancel_loses_nothing_and_start_resumes_it(truth, site_server, workers, worker_env):
    """Real workers crawl a loopback site slowly; the job is cancelled mid-way, and a new job
    crawls exactly what was left: every page once, none lost."""
    project = Project.objects.create(name="cancel", slug="cancel", allow_private=True, max_per_host=1)
    Seed.objects.create(project=project, url=f"{site_server.url}/")
    for stage in ("fetch", "extract", "download"):
        workers.start(stage, stage)
    first, _ = steering.crawl_start(project=project, trigger=T)
    done = Page.objects.filter(project=project, state="done")
    wait_until(lambda: done.count() >= 20, timeout=90, interval=0.3, what="20 pages done")
    assert steering.job_cancel(job=first)
    leased = Page.objects.filter(project=project, state="leased")
    wait_until(lambda: not leased.exists(), timeout=90, interval=0.3, what="claimed batches to finish")
    fetched = Page.objects.filter(project=project, fetch_count__gte=1)
    settled = fetched.count()
    claimed = fetch_wakeup_claims(workers.log_dir / "fetch.log")
    assert (claimed, fetched.count()) == (0, settled), (
        "a cancelled job fetches nothing more (what it fetched waits, owed)"
    )
    assert Page.objects.filter(project=project, state="queued").exists(), "its owed work waits"

    second, _ = steering.crawl_start(project=project, trigger=T)
    assert second.id != first.id

    def drained() -> bool:
        reap(project_id=project.id)
        jobs.jobs_tick()
        return Job.objects.get(id=second.id).state not in Job.ACTIVE_STATES

    wait_until(drained, timeout=180, interval=0.3, what="the second job to end")
    second.refresh_from_db()
    assert second.state == "succeeded", second.message
    done = Page.objects.filter(project=project, state="done")
    paths = {u.removeprefix(site_server.url) for u in done.values_list("url", flat=True)}
    assert set(truth["pages"]) <= paths, f"lost: {sorted(set(truth['pages']) - paths)[:5]}"
    assert set(done.values_list("fetch_count", flat=True)) == {1}, "no page fetched twice"
    assert second.stats["pages_done"] == Page.objects.filter(job_id=second.id, state="done").count() > 0


@pytest.mark.integration
def test_the_crawl_command_counts_its_own_job_and_names_projects_by_host_and_port(site_server, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env |= {"CRAWLHUB_VAR_DIR": str(tmp_path / "var"), "DJANGO_SETTINGS_MODULE": "crawlproject.settings"}
    migrate_embedded(env)
    first = run_manage(["crawl", f"{site_server.url}/", "--allow-private", "--json", "--timeout", "240"], env)
    assert first.returncode == 0, first.stderr[-2000:]
    one = last_json_line(first.stdout)
    port = site_server.url.rsplit(":", 1)[1]
    assert one["project"] == f"127001-{port}" and one["state"] == "succeeded" and one["pages_fetched"] > 300
    assert f"job {one['job']} of project 127.0.0.1:{port}" in first.stderr, "the name, as the console shows it"

    again = run_manage(["crawl", f"{site_server.url}/", "--json", "--timeout", "120"], env)
    assert again.returncode == 0, again.stderr[-2000:]
    two = last_json_line(again.stdout)
    assert two["project"] == one["project"], "the same site: the same project"
    assert two["job"] is None and two["nothing_to_do"], "nothing left to crawl: no empty job (issue 48, point 9)"
    assert "using the existing project" in again.stderr and "allows private addresses (set earlier)" in again.stderr

    listed = run_manage(["jobs", f"127001-{port}", "--json"], env)
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [r["id"] for r in rows] == [one["job"]] and rows[0]["counts"]["pages_done"] > 300


@pytest.mark.integration
def test_bad_crawl_options_are_command_errors_not_tracebacks(tmp_path, db):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env |= {"CRAWLHUB_VAR_DIR": str(tmp_path / "var"), "DJANGO_SETTINGS_MODULE": "crawlproject.settings"}
    migrate_embedded(env)
    done = run_manage(["crawl", "not a url"], env)  # from a shell: the message and an exit code, no traceback
    assert done.returncode == 1 and "not a URL that can be crawled" in done.stderr and "Traceback" not in done.stderr
    for args, message in [
        (["http://a.test/", "--max-pages", "-5"], "--max-pages: -5 is out of range"),
        (["http://a.test/", "--concurrency", "many"], "'many' is not a whole number"),
        (["http://a.test/", "--timeout", "-1"], "seconds cannot be negative"),
    ]:
        with pytest.raises(CommandError, match=re.escape(message)):
            call_command("crawl", *args)
    refused = run_manage(["crawl", "http://127.0.0.1:9/", "--json", "--timeout", "60"], env)
    assert refused.returncode == 1 and "--allow-private" in refused.stderr
    assert "refused seed http://127.0.0.1:9/" in refused.stderr
