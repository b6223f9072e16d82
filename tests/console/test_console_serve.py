"""Acceptance: a new user runs `make serve` (the embedded default: SQLite, the workers and beat the
command starts itself), logs in, adds a project and its seed in the admin, presses Start on the
overview and sees the job run and succeed; its page shows its counts and a failing URL's error.
Screenshots of the overview, the job page and Try-a-URL are kept under var/test-artifacts/."""

import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.conftest import BASE_DIR
from tests.console.test_admin_browser import ARTIFACTS, chromium_page
from tests.helpers import free_port, group_interrupt, wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (scripts/system-deps.sh)"),
]

PASSWORD = "a-long-test-password-9"
ADMIN_HEADER_BG = "rgb(65, 118, 144)"  # Django admin's --header-bg (#417690): only with its CSS loaded


@contextlib.contextmanager
def make_serve(var: Path, port: int) -> Iterator[subprocess.Popen]:
    """`make serve` exactly as the README says, on the embedded default (no DATABASE_URL, no broker)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env |= {
        "CRAWLHUB_VAR_DIR": str(var),
        "CRAWLHUB_ADMIN_PASSWORD": PASSWORD,
        "CRAWL_REAP_INTERVAL_SECONDS": "2",
        "CONSOLE_JOBS_TICK_SECONDS": "1",
        "DJANGO_SETTINGS_MODULE": "crawlproject.settings",
    }
    with open(var.parent / "serve.log", "wb") as log:
        proc = subprocess.Popen(
            ["make", "--no-print-directory", "serve", f"PORT={port}"],
            cwd=BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        group_interrupt(proc)


def processes_of(var: Path) -> list[str]:
    """Command lines of the processes still running with this console's var folder in their
    environment: the command, its worker and pool, beat, the web server and its workers."""
    mark = f"CRAWLHUB_VAR_DIR={var}".encode()
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if mark in (proc / "environ").read_bytes().split(b"\0"):
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
    return found


def wait_ready(log: Path, proc: subprocess.Popen, timeout: float = 180) -> str:
    """The command's own progress says when the console is ready."""

    def ready() -> str | None:
        text = log.read_text(errors="replace") if log.exists() else ""
        if "console ready:" in text:
            return text
        assert proc.poll() is None, f"make serve exited ({proc.returncode}):\n{text[-3000:]}"
        return None

    def output() -> str:
        return f"make serve to get ready:\n{log.read_text(errors='replace')[-3000:]}"

    return wait_until(ready, timeout=timeout, interval=0.5, what=output)


def test_a_new_user_serves_the_console_starts_a_crawl_and_reads_its_job(truth, site_server, tmp_path):
    var, port = tmp_path / "var", free_port()
    var.mkdir()
    base = f"http://127.0.0.1:{port}"
    shots = {name: ARTIFACTS / f"console-{name}.png" for name in ("overview", "job", "tryurl")}
    for shot in shots.values():
        shot.unlink(missing_ok=True)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    with make_serve(var, port) as proc:
        startup = wait_ready(tmp_path / "serve.log", proc)
        with chromium_page() as page:
            page.goto(f"{base}/admin/login/")
            header_bg = page.eval_on_selector("#header", "e => getComputedStyle(e).backgroundColor")
            page.fill("#id_username", "admin")
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            expect(page.locator("#crawl-console")).to_be_visible()
            expect(page.locator(".workers-panel")).to_contain_text("fetch")  # the embedded worker reported in

            page.goto(f"{base}/admin/crawl/project/add/")
            page.fill("#id_name", "served site")
            page.check("#id_allow_private")
            page.fill("#id_seeds-0-url", f"{site_server.url}/")
            page.click("input[name=_save]")
            expect(page.locator("ul.messagelist")).to_contain_text("was added successfully")

            page.goto(f"{base}/admin/dashboard/")
            row = page.locator("#overview-projects tr", has_text="served site")
            row.locator("button.overview-start").click()
            expect(row.locator(".job-state")).to_have_text("running", timeout=60_000)
            expect(row.locator(".job-state")).to_have_text("succeeded", timeout=180_000)
            page.screenshot(path=str(shots["overview"]), full_page=True)
            overview_text = row.inner_text()

            row.get_by_role("link", name=re.compile(r"^job \d+")).click()
            expect(page.locator(".job-report")).to_be_visible()
            job_text = page.locator(".job-report").inner_text()
            page.screenshot(path=str(shots["job"]), full_page=True)

            page.goto(f"{base}/admin/tryurl/")
            page.fill("#id_url", f"{site_server.url}/")
            page.check("#id_allow_private")
            page.click("input[type=submit]")
            expect(page.locator("h2", has_text=site_server.url)).to_be_visible()
            page.screenshot(path=str(shots["tryurl"]), full_page=True)

    assert "workers" in startup and "scheduler" in startup, startup

    def still_running() -> str:
        return f"Ctrl-C to stop the worker, beat and web server with the command; running: {processes_of(var)}"

    wait_until(lambda: processes_of(var) == [], timeout=30, interval=0.5, what=still_running)
    assert header_bg == ADMIN_HEADER_BG, f"the admin's CSS did not load (header background {header_bg})"

    with sqlite3.connect(var / "db.sqlite3") as db:
        (job_id, state, stats_json) = db.execute(
            "SELECT j.id, j.state, j.stats FROM console_job j JOIN crawl_project p ON p.id = j.project_id "
            "WHERE p.name = 'served site'"
        ).fetchone()
        done = db.execute("SELECT count(*) FROM crawl_page WHERE job_id = ? AND state = 'done'", (job_id,)).fetchone()
        missing_url, code = db.execute(
            "SELECT url, error_code FROM crawl_page WHERE job_id = ? AND state = 'failed' ORDER BY url LIMIT 1",
            (job_id,),
        ).fetchone()
    assert state == "succeeded"
    assert json.loads(stats_json)["pages_done"] == done[0], "an ended job keeps its counts"
    assert done[0] >= truth["n_pages"], "every reachable page was crawled by the job"
    assert f"{done[0]} / " in overview_text
    assert f"{done[0]} pages done" in job_text, job_text[:500]
    assert missing_url in job_text and code in job_text, "the job page lists a failing URL with its error"
    assert "Log (warnings and errors" in job_text and "serve-" in job_text, "its tasks' warnings, with the worker"
    for shot in shots.values():
        png = shot.read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000, shot


def test_serve_keeps_the_first_admins_password_in_a_file_of_its_database(db, settings, tmp_path):
    from console.management.commands.serve import Command as ServeCommand

    settings.VAR_DIR = tmp_path
    (tmp_path / "admin-password").write_text("the embedded admin's\n")
    said = ServeCommand()._admin_user()
    kept = list(tmp_path.glob("admin-password-*"))
    assert len(kept) == 1 and kept[0].name.endswith(settings.DATABASES["default"]["NAME"])
    assert kept[0].read_text().strip() in said
    assert (tmp_path / "admin-password").read_text() == "the embedded admin's\n", "another database's is kept"


def beat_pids(var: Path) -> list[int]:
    """The celery beat processes of this console (by the var folder in their environment)."""
    mark, found = f"CRAWLHUB_VAR_DIR={var}".encode(), []
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if b" beat " in (proc / "cmdline").read_bytes().replace(b"\0", b" ") and mark in (
                proc / "environ"
            ).read_bytes().split(b"\0"):
                found.append(int(proc.name))
    return found


def test_12_serve_restarts_a_beat_that_died_and_says_so(tmp_path):
    var, port = tmp_path / "var", free_port()
    var.mkdir()
    log = tmp_path / "serve.log"
    with make_serve(var, port) as proc:
        wait_ready(log, proc)
        (beat,) = beat_pids(var)
        os.kill(beat, signal.SIGKILL)

        def restarted() -> list[int]:
            assert proc.poll() is None, f"make serve exited:\n{log.read_text()[-3000:]}"
            return [pid for pid in beat_pids(var) if pid != beat] if "restarting it" in log.read_text() else []

        wait_until(restarted, timeout=30, what=lambda: f"beat to be restarted:\n{log.read_text()[-3000:]}")
        assert proc.poll() is None, "the console goes on"
    assert "[scheduler] celery beat exited (-9); restarting it" in log.read_text()
