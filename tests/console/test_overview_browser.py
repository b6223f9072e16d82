"""Acceptance: the overview in a real browser (Debian's chromium through Playwright) says what its
buttons could not do, offers the recrawls when Start finds nothing left to crawl, and shows pages
waiting out a retry with their reason and time, on the overview and on the project's dashboard."""

import shutil
import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect

from console.models import Job
from console.runs import jobs, steering
from crawl.models import Project, Seed
from tests.console.test_admin_browser import ARTIFACTS, PASSWORD, chromium_page, log_in
from tests.console.test_admin_console import add_page

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (scripts/system-deps.sh)"),
]


def finished_project() -> Project:
    project = Project.objects.create(name="finished", slug="finished", allow_private=True)
    Seed.objects.create(project=project, url="http://a.test/")
    add_page(project, "http://a.test/", "done", is_seed=True, next_fetch_at=timezone.now() - timedelta(hours=1))
    add_page(project, "http://a.test/x", "done", next_fetch_at=timezone.now() + timedelta(hours=1))
    Job.objects.create(project=project, trigger="admin", state="succeeded", message="2 pages done, 0 failed")
    return project


def retrying_project() -> Project:
    project = Project.objects.create(name="retrying", slug="retrying", allow_private=True)
    due = timezone.now() + timedelta(seconds=90)
    for path in ("a", "b"):
        add_page(project, f"http://down.test/{path}", "queued", next_fetch_at=due, error_code="connect_error",
                 error_message="the host was unreachable (connect_error)")  # fmt: skip
    return project


def running_project() -> Project:
    project = Project.objects.create(name="running", slug="running", allow_private=True)
    job, _ = jobs.job_begin(project=project, kind=Job.Kind.CRAWL, trigger=Job.Trigger.ADMIN)
    Job.objects.filter(id=job.id).update(state=Job.State.RUNNING)
    add_page(project, "http://b.test/", "queued")
    return project


def in_a_thread(action) -> None:
    """A database write while Playwright's event loop runs in this thread (Django refuses it here)."""
    worker = threading.Thread(target=action)
    worker.start()
    worker.join()


def test_the_overview_says_refusals_offers_recrawls_and_shows_retries(live_server):
    get_user_model().objects.create_superuser("operator", "operator@example.com", PASSWORD)
    finished, retrying, running = finished_project(), retrying_project(), running_project()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    base = live_server.url

    with chromium_page() as page:
        log_in(page, base)
        page.goto(f"{base}/admin/dashboard/")
        retry_note = page.locator("tr[data-project=retrying] .overview-retrying")
        expect(retry_note).to_contain_text("2 retrying connect_error, next at")
        page.locator("tr[data-project=finished] button.overview-start").click()
        message = page.locator("#overview-message")
        expect(message).to_contain_text("finished has nothing left to crawl (2 pages done, 0 failed)")
        expect(message.locator("button.overview-recrawl")).to_have_text("Recrawl everything")
        page.screenshot(path=str(ARTIFACTS / "overview-start-finished.png"), full_page=True)
        message.locator("button.overview-recrawl_due").click()
        expect(page.locator("tr[data-project=finished] .job-state")).to_have_text("queued")

        page.route("**/admin/dashboard/overview/", lambda route: route.abort())  # the table stays as drawn
        in_a_thread(lambda: steering.job_cancel(job=jobs.job_current(running)))
        page.locator("tr[data-project=running] button.overview-cancel").click()
        expect(message).to_contain_text("cancel: no job of running in a state that allows it")
        page.screenshot(path=str(ARTIFACTS / "overview-refused-action.png"), full_page=True)
        page.unroute("**/admin/dashboard/overview/")

        page.goto(f"{base}/admin/dashboard/?project={retrying.id}")
        expect(page.locator("#retrying li")).to_contain_text(
            "2 pages retrying connect_error, next at", use_inner_text=True
        )
        expect(page.locator("#retrying li")).to_contain_text("the host was unreachable (connect_error)")
        page.screenshot(path=str(ARTIFACTS / "dashboard-retrying.png"), full_page=True)

    recrawl = Job.objects.filter(project=finished).order_by("-id").first()
    assert (recrawl.kind, Job.objects.filter(project=finished).count()) == ("recrawl", 2)
    assert not Job.objects.filter(project=finished, kind="crawl", state="queued").exists(), "Start made no job"
    for name in ("overview-start-finished", "overview-refused-action", "dashboard-retrying"):
        assert (ARTIFACTS / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
