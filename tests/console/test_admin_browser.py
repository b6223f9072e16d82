"""Acceptance: an operator in a real browser (Debian's chromium through Playwright) logs in, adds a
project with two seeds, starts it from the project list and watches the dashboard while real
Celery workers crawl a loopback site; the dashboard's numbers are the database's."""

import contextlib
import os
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Page as BrowserPage
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import expect, sync_playwright

from console.selectors import project_errors, project_progress
from crawl.models import Page, Project
from tests.conftest import BASE_DIR, beat_stop

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (scripts/system-deps.sh)"),
]

ARTIFACTS = Path(os.environ.get("CRAWLHUB_TEST_ARTIFACTS", BASE_DIR / "var" / "test-artifacts"))
PASSWORD = "correct-horse-battery-staple"
CRAWL_TIMEOUT_MS = 60_000


@contextlib.contextmanager
def chromium_page(**options) -> Iterator[BrowserPage]:
    """A page in Debian's chromium, launched the way core/net/browser.py launches it (`options`:
    Playwright's new_page arguments, a viewport or time zone). The test closes it before reading
    the database, so no ORM call runs while Playwright's event loop is active."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=shutil.which("chromium"),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            page = browser.new_page(**({"viewport": {"width": 1280, "height": 900}} | options))
            page.set_default_timeout(30_000)
            yield page
        finally:
            browser.close()


@contextlib.contextmanager
def beat(env: dict, log_dir: Path) -> Iterator[subprocess.Popen]:
    """celery beat, as a deployment runs it: its crawl.reap republishes the work a fetch batch left
    queued (a host's slots were taken) and brings back expired leases."""
    with open(log_dir / "beat.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "crawlproject", "beat", "-l", "INFO"],
            cwd=BASE_DIR,
            env=env | {"CRAWL_REAP_INTERVAL_SECONDS": "2"},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        try:
            yield proc
        finally:
            beat_stop(proc)


def log_in(page: BrowserPage, base: str) -> None:
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page.locator("#crawl-console")).to_be_visible()


def add_project(page: BrowserPage, base: str, seeds: list[str]) -> None:
    page.goto(f"{base}/admin/crawl/project/add/")
    page.fill("#id_name", "browser crawl")
    page.fill("#id_max_depth", "2")
    page.check("#id_allow_private")
    page.fill("#id_seeds-0-url", seeds[0])
    page.click("#seeds-group .add-row a")
    page.fill("#id_seeds-1-url", seeds[1])
    page.click("input[name=_save]")
    expect(page.locator("ul.messagelist")).to_contain_text("was added successfully")


def start_from_the_list(page: BrowserPage) -> None:
    row = page.locator("#result_list tr", has_text="browser crawl")
    row.locator("input.action-select").check()
    page.select_option("select[name=action]", "start")
    page.click("button[name=index]")
    expect(page.locator("ul.messagelist")).to_contain_text(re.compile(r"browser crawl: job \d+ started", re.IGNORECASE))


def dashboard_numbers(page: BrowserPage) -> dict[str, str]:
    return page.eval_on_selector_all(
        "[data-field]", "els => Object.fromEntries(els.map(e => [e.dataset.field, e.textContent.trim()]))"
    )


def table_pairs(page: BrowserPage, body_id: str) -> dict[str, int]:
    rows = page.eval_on_selector_all(f"#{body_id} tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    return {r[0]: int(r[1]) for r in rows if len(r) >= 2}


def wait_until_drained(page: BrowserPage) -> bool:
    """True once the dashboard shows done pages and no work owed (it refreshes itself every 2 s)."""
    try:
        page.wait_for_function(
            """() => {
                const n = (id) => Number(document.getElementById(id).textContent);
                return n('pending') === 0 && n('pages-done') > 0;
            }""",
            timeout=CRAWL_TIMEOUT_MS,
        )
    except PlaywrightTimeoutError:
        return False
    return True


def worker_logs(log_dir: Path) -> str:
    return "\n".join(f"--- {log.name}\n{log.read_text()[-3000:]}" for log in sorted(log_dir.glob("*.log")))


def test_an_operator_adds_starts_and_watches_a_crawl(live_server, site_server, workers, worker_env, tmp_path):
    get_user_model().objects.create_superuser("operator", "operator@example.com", PASSWORD)
    for stage in ("fetch", "extract", "download"):
        workers.start(stage, stage)
    base, site = live_server.url, site_server.url
    screenshot = ARTIFACTS / "dashboard.png"
    screenshot.unlink(missing_ok=True)

    with beat(worker_env, tmp_path), chromium_page() as page:
        log_in(page, base)
        add_project(page, base, [f"{site}/", f"{site}/s01/p00001.html"])
        start_from_the_list(page)
        page.locator("#result_list tr", has_text="browser crawl").get_by_role("link", name="dashboard").click()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        drained = wait_until_drained(page)
        shown = dashboard_numbers(page)
        errors_shown = table_pairs(page, "errors-by-code")
        bars = page.locator("#throughput-chart rect.bar").count()
        page.screenshot(path=str(screenshot), full_page=True)

    assert drained, f"the dashboard never showed a drained crawl: {shown}\n{worker_logs(tmp_path)}"

    project = Project.objects.get(name="browser crawl")
    assert project.slug == "browser-crawl", "the admin filled the slug in from the name"
    assert sorted(project.seeds.values_list("url", flat=True)) == sorted([f"{site}/", f"{site}/s01/p00001.html"])
    progress = project_progress(project)
    for state in Page.State.values:
        assert int(shown[f"pages.{state}"]) == progress["pages"].get(state, 0), state
    for state in ("queued", "leased", "done", "failed"):
        assert int(shown[f"assets.{state}"]) == progress["assets"].get(state, 0), state
    assert int(shown["pages.done"]) > 20, "the crawl went past the two seeds"
    assert int(shown["assets.done"]) > 0, "the download workers stored media"
    fetched = Page.objects.filter(project=project, fetched_at__isnull=False).count()
    assert int(shown["rates.1h.pages"]) == int(shown["rates.1d.pages"]) == fetched
    assert errors_shown == dict(list(project_errors(project).items())[:20])
    assert bars == 60

    png = screenshot.read_bytes()
    width, height = struct.unpack(">II", png[16:24])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    assert width == 1280 and height >= 900 and len(png) > 20_000
