"""Acceptance (issue 48, 1): a distributed deployment whose workers leave out the control queue
(`-X control`, the explicit way now that every worker takes it by default). A job started from the
console does all its pages, then stays `running` with nothing owed: the overview and the project's
dashboard say why, in a real browser (Debian's chromium). Screenshots under var/test-artifacts/."""

import shutil
import subprocess
import sys

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from console.models import Job, WorkerBeat
from console.runs import steering
from crawl.models import Page, Project, Seed
from tests.conftest import BASE_DIR
from tests.console.test_admin_browser import ARTIFACTS, PASSWORD, chromium_page, log_in
from tests.helpers import wait_until
from tests.servers import Site, SiteServer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (scripts/system-deps.sh)"),
]

HTML = {"Content-Type": "text/html; charset=utf-8"}
NO_CONTROL = "No worker consumes the 'control' queue"
WORKERS = {"fetch": "fetch", "extract": "extract,download"}  # -Q of each, all with -X control


def small_site() -> Site:
    page = lambda links: (200, HTML, "".join(f'<a href="{u}">{u}</a>' for u in links).encode())  # noqa: E731
    return Site(files={"/": page(["/a", "/b"]), "/a": page(["/b"]), "/b": page(["/"])})


def start_workers(env: dict, tmp_path) -> list[subprocess.Popen]:
    procs = []
    for name, queues in WORKERS.items():
        command = [sys.executable, "-m", "celery", "-A", "crawlproject", "worker", "-Q", queues, "-X", "control"]
        command += ["-n", f"{name}@%h", "-c", "1", "-l", "INFO"]
        with open(tmp_path / f"{name}.log", "w") as log:
            procs.append(subprocess.Popen(command, cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT))
    return procs


def test_the_overview_and_dashboard_warn_when_no_worker_consumes_control(live_server, worker_env, broker, tmp_path):
    get_user_model().objects.create_superuser("operator", "operator@example.com", PASSWORD)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shots = {name: ARTIFACTS / f"no-control-{name}.png" for name in ("overview", "dashboard")}
    for shot in shots.values():
        shot.unlink(missing_ok=True)
    procs = start_workers(worker_env, tmp_path)
    try:
        with SiteServer(small_site()) as server:
            wait_until(lambda: WorkerBeat.objects.count() == len(WORKERS), timeout=60, what="the workers' heartbeats")
            project = Project.objects.create(name="no control", slug="no-control", allow_private=True)
            Seed.objects.create(project=project, url=f"{server.url}/")
            job, _ = steering.crawl_start(project=project, trigger=Job.Trigger.ADMIN)
            wait_until(
                lambda: Page.objects.filter(project=project, state="done").count() == 3,
                timeout=90,
                what=lambda: "".join((tmp_path / f"{n}.log").read_text() for n in WORKERS)[-3000:],
            )
        job.refresh_from_db()
        assert job.state in ("queued", "running"), "nobody ends it: the jobs tick rides the control queue"
        base = live_server.url
        with chromium_page() as page:
            log_in(page, base)
            page.goto(f"{base}/admin/dashboard/")
            warnings = page.locator("#overview-warnings")
            expect(warnings).to_contain_text(NO_CONTROL)
            expect(warnings).to_contain_text("No scheduler (celery beat) is running")
            page.screenshot(path=str(shots["overview"]), full_page=True)
            page.goto(f"{base}/admin/dashboard/?project={project.id}")
            expect(page.locator(".dashboard-warnings")).to_contain_text(NO_CONTROL)
            page.screenshot(path=str(shots["dashboard"]), full_page=True)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(30)
    for shot in shots.values():
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", shot
