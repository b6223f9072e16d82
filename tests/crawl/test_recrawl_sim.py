"""A simulated recrawl run with real workers: the test owns the clock of a site whose hub page
changes mid-run, ticks the dispatcher (as beat would), and prints the freshness figures."""

import time
from collections import Counter

import pytest

from bench.check import canon_path
from crawl.frontier.recrawl import pages_dispatch
from crawl.models import Page, PageVersion
from crawl.services.projects import project_get_or_create
from tests.conftest import run_manage
from tests.servers import Site, SiteServer

pytestmark = pytest.mark.integration
HTML = {"Content-Type": "text/html; charset=utf-8"}
RUN_SECONDS, CHANGE_AT, TICK = 20.0, 8.0, 0.5
HUB_SECONDS, MIN_SECONDS = 2, 1


def hub(headline: str, links: list[str]) -> tuple:
    anchors = "".join(f'<a href="{h}">{h}</a>' for h in links)
    return 200, HTML, f"<html><body><h1>{headline}</h1>{anchors}</body></html>".encode()


def test_a_changed_hub_is_seen_quickly_and_quiet_pages_are_fetched_less(workers, worker_env):
    quiet = [f"/p{i}.html" for i in range(4)]
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    site.files["/"] = hub("Headline A", quiet)
    for path in quiet:
        site.files[path] = (200, HTML, f"<html><body><p>Quiet page {path}.</p></body></html>".encode())
    project = project_get_or_create(
        name="sim",
        allow_private=True,
        revisit_min_seconds=MIN_SECONDS,
        revisit_max_seconds=64,
        hub_revisit_seconds=HUB_SECONDS,
    )
    for stage in ("fetch", "extract", "download"):
        workers.start(stage, stage)
    with SiteServer(site) as server:
        done = run_manage(
            ["crawl", f"{server.url}/", "--workers", "0", "--project", "sim", "--timeout", "60"], worker_env
        )
        assert done.returncode == 0, done.stdout + done.stderr
        started = time.time()
        changed_at = None
        while time.time() - started < RUN_SECONDS:
            if changed_at is None and time.time() - started >= CHANGE_AT:
                site.files["/"] = hub("Headline B", [*quiet, "/new.html"])
                site.files["/new.html"] = (200, HTML, b"<html><body><p>Brand new.</p></body></html>")
                changed_at = time.time()
            pages_dispatch(project_id=project.id)  # beat's tick
            time.sleep(TICK)
        window = [(t, p) for t, p in server.log if t >= started]

    hub_page = Page.objects.get(project=project, is_seed=True)
    stored = PageVersion.objects.filter(page=hub_page, text__contains="Headline B").get()
    seen_after = stored.fetched_at.timestamp() - changed_at
    new_page = Page.objects.get(project=project, url__endswith="/new.html")
    first_new_fetch = min(t for t, p in window if p == "/new.html")
    new_after = first_new_fetch - stored.fetched_at.timestamp()
    fetches = Counter(canon_path(p) for _, p in window)
    fixed = RUN_SECONDS / MIN_SECONDS
    adaptive = sum(fetches[p] for p in quiet) / len(quiet)
    print(
        f"\nhub change stored {seen_after:.1f} s after it happened (hub interval {HUB_SECONDS} s); "
        f"new page fetched {new_after:.1f} s after the hub; quiet pages fetched {adaptive:.1f} times in "
        f"{RUN_SECONDS:.0f} s, against {fixed:.0f} at a fixed {MIN_SECONDS} s interval"
    )
    assert seen_after <= HUB_SECONDS + 2 * TICK + 1.5
    assert new_after <= 3
    assert new_page.state == "done"
    assert adaptive <= 0.5 * fixed
    assert PageVersion.objects.filter(page=hub_page).count() == 2
