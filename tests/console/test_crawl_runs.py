"""Issue 48: what a run says about itself. A refused seed makes a failed run naming allow_private
(point 3); a finished project gets no empty job from the command, as Start answers (9); the
summary's rate, `earlier` and time are this run's (10); the lines name the project as the console
does (11); a database restart in the command's first seconds is waited out (11)."""

import io
import json
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from console.management.commands._crawl_summary import crawl_summary, report_lines
from console.models import Job
from console.runs import jobs, steering
from console.runs.job_runs import job_start
from core.canonical import canonicalize, url_key
from crawl.models import Page, Seed
from tests.conftest import BASE_DIR
from tests.servers import Site, SiteServer

HTML = {"Content-Type": "text/html; charset=utf-8"}
T = Job.Trigger.COMMAND


def seed_page(project, url: str, state: str, **fields) -> Page:
    Seed.objects.get_or_create(project=project, url=url)
    canonical = canonicalize(url)
    return Page.objects.create(
        project=project, url=canonical, url_key=url_key(canonical), host="127.0.0.1", state=state, is_seed=True,
        **fields,
    )  # fmt: skip


def test_3_a_job_whose_seeds_were_refused_before_it_began_fails_naming_allow_private(make_project):
    project = make_project(name="refused early")
    seed_page(project, "http://127.0.0.1:9/", "failed", error_code="blocked_address")  # taken before the job
    job, _ = jobs.job_begin(project=project, kind=Job.Kind.CRAWL, trigger=T)
    assert jobs.job_finish(job=job)
    job.refresh_from_db()
    assert job.state == "failed", job.message
    assert "1 blocked_address" in job.message and "allow_private" in job.message


def test_3_a_job_whose_pages_were_refused_names_allow_private(make_project):
    project = make_project(name="refused")
    job, _ = jobs.job_begin(project=project, kind=Job.Kind.CRAWL, trigger=T)
    seed_page(project, "http://127.0.0.1:9/", "failed", error_code="blocked_address", job_id=job.id)
    jobs.job_finish(job=job)
    job.refresh_from_db()
    assert job.state == "failed" and "allow_private setting allows them" in job.message, job.message


@pytest.mark.integration
def test_3_the_python_api_example_on_a_loopback_url_is_refused_naming_allow_private(tmp_path):
    """The seed is checked when it is added (as every door checks it): a ValueError that names the
    setting, and nothing added or run."""
    script = (
        "import crawlhub, sys\n"
        "site = crawlhub.project('docs site', max_pages=500, max_depth=3)\n"
        "crawlhub.add_seeds(site, [sys.argv[1]])\n"
        "result = crawlhub.run(site, timeout=120, on_notice=print)\n"
        "print(result.job.state, result.completed)\n"
        "print(result.job.message)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env |= {"CRAWLHUB_VAR_DIR": str(tmp_path / "var"), "PYTHONPATH": str(BASE_DIR)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    manage = [sys.executable, "manage.py", "migrate", "-v0"]
    assert subprocess.run(manage, cwd=BASE_DIR, env=env, capture_output=True, timeout=120).returncode == 0
    with SiteServer(Site(files={"/": (200, HTML, b"<title>home</title>")})) as server:
        done = subprocess.run(
            [sys.executable, "-c", script, f"{server.url}/"], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ValueError: seeds refused (none added)" in done.stderr
    assert f"{server.url}/: blocked_address" in done.stderr and "(allow_private=True allows it)" in done.stderr
    assert "failed" not in done.stdout and "succeeded" not in done.stdout, "nothing ran"


def test_9_the_crawl_command_makes_no_empty_job_on_a_finished_project(make_project):
    project = make_project(name="finished", allow_private=True)
    seed_page(project, "http://127.0.0.1:9/", "done", next_fetch_at=timezone.now() + timedelta(hours=1))
    last = Job.objects.create(project=project, trigger=T, state="succeeded", message="1 pages done")
    out, err = io.StringIO(), io.StringIO()
    call_command("crawl", "http://127.0.0.1:9/", "--project", "finished", "--workers", "0", "--json", stdout=out,
                 stderr=err)  # fmt: skip
    assert list(Job.objects.all()) == [last], "no empty job hides the last run (Start answers 409 likewise)"
    summary = json.loads(out.getvalue().splitlines()[-1])
    assert (
        summary["nothing_to_do"] is True and summary["job"] is None and summary["earlier"] == {"done": 1, "failed": 0}
    )
    assert out.getvalue().startswith("finished: nothing to crawl, every page is finished (1 done, 0 failed")


def test_10_the_summary_of_a_refused_run_has_no_rate_and_its_time_is_the_runs(make_project):
    project = make_project(name="ten")
    job, _ = jobs.job_begin(project=project, kind=Job.Kind.CRAWL, trigger=T)
    Job.objects.filter(id=job.id).update(created_at=timezone.now() - timedelta(seconds=130))  # a worker's start
    job.refresh_from_db()
    steering.job_pause(job=job)
    Job.objects.filter(id=job.id).update(paused_at=timezone.now() - timedelta(seconds=100))  # Ctrl-C, then later
    job.refresh_from_db()
    assert steering.job_resume(job=job)
    seed_page(project, "http://127.0.0.1:9/", "failed", error_code="blocked_address", job_id=job.id)
    jobs.job_finish(job=job)
    job.refresh_from_db()
    summary = crawl_summary(project, job, True)
    assert summary["pages_per_second"] == 0.0, "no page was fetched"
    assert summary["earlier"] == {}, "this run's refusal is not an earlier run's"
    assert 25 <= summary["seconds"] <= 90, "the worker's start counts, the pause does not"


def test_11_the_commands_lines_name_the_project_as_the_console_does(make_project):
    project = make_project(name="127.0.0.1:8001")  # its slug has no dots
    notices = []
    job = job_start(project, seeds={}, recrawl=False, notice=notices.append)
    assert notices == [f"job {job.id} of project 127.0.0.1:8001"]
    jobs.job_finish(job=job)
    job.refresh_from_db()
    summary = crawl_summary(project, job, True)
    assert (summary["project"], summary["name"]) == (project.slug, "127.0.0.1:8001") and project.slug != project.name
    assert report_lines(summary | {"nothing_to_do": False})[0].startswith(f"127.0.0.1:8001 job {job.id} ")


@pytest.mark.integration
def test_11_a_database_restart_in_the_crawl_commands_first_seconds_is_waited_out(tmp_path):
    from tests.faults.servers import PostgresServer

    pg = PostgresServer().start()
    try:
        env = {k: v for k, v in os.environ.items() if k != "CELERY_BROKER_URL"}  # the embedded broker
        env |= {"DATABASE_URL": pg.url, "CRAWLHUB_VAR_DIR": str(tmp_path / "var")}
        env |= {"DJANGO_SETTINGS_MODULE": "crawlproject.settings"}
        manage = [sys.executable, "manage.py"]
        migrated = subprocess.run([*manage, "migrate", "-v0"], cwd=BASE_DIR, env=env, capture_output=True, timeout=300)
        assert migrated.returncode == 0, migrated.stderr
        pg._pg_ctl("stop", "-m", "fast")  # down as the command starts: a restart in its first seconds
        threading.Timer(4.0, pg._pg_ctl, args=("start",)).start()
        with SiteServer(Site(files={"/": (200, HTML, b"<title>home</title>")})) as server:
            done = subprocess.run(
                [*manage, "crawl", f"{server.url}/", "--allow-private", "--timeout", "180"], cwd=BASE_DIR, env=env,
                capture_output=True, text=True, timeout=300,
            )  # fmt: skip
    finally:
        time.sleep(0.1)
        pg.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "waiting for the database or broker: OperationalError" in done.stderr
    assert " job 1 succeeded: 1 pages done" in done.stdout
