"""Fair shares: while one project crawls a 100,000-page site on one worker (thousands of pages
owed), a monitoring project's hub, revisited every 20 s, changes three times; each change is
stored, with the page it newly links to, within 30 s."""

import time

import pytest

from crawl.frontier.reaper import reap
from crawl.frontier.recrawl import pages_dispatch
from crawl.models import Page
from crawl.services.projects import project_get_or_create, seeds_add
from tests.conftest import generated_site
from tests.faults.harness import full_only
from tests.helpers import wait_until
from tests.servers import Site, SiteServer

pytestmark = [pytest.mark.integration, full_only, pytest.mark.timeout(900)]
HTML = {"Content-Type": "text/html; charset=utf-8"}
LATENCY_LIMIT = 30.0


def hub_page(items: int) -> tuple:
    links = "".join(f'<a href="/item{i}.html">item {i}</a>' for i in range(items))
    return 200, HTML, f"<html><body><h1>news</h1>{links}</body></html>".encode()


def test_a_small_projects_hub_is_seen_within_seconds_while_another_owes_thousands(workers, worker_env):
    hub_site = Site(default=(200, HTML, b"<html><body>an item</body></html>"))
    hub_site.files["/"] = hub_page(1)
    with SiteServer.generated(generated_site(100_000)) as big, SiteServer(hub_site) as hub:
        workers.env = worker_env
        workers.start("all", "fetch,extract,download", concurrency=2)
        crawl = project_get_or_create(name="big", allow_private=True, download_media=False)
        seeds_add(project=crawl, urls=[f"{big.url}/"])
        queued = Page.objects.filter(project=crawl, state="queued")
        wait_until(lambda: queued.count() >= 5000, timeout=300, interval=1.0, what="the big crawl's backlog")
        monitor = project_get_or_create(name="monitor", allow_private=True, hub_revisit_seconds=20)
        seeds_add(project=monitor, urls=[f"{hub.url}/"])
        latencies = []
        for change in range(1, 4):
            before = _after_beat(monitor, lambda n=change: _item_done(monitor, n - 1))
            wait_until(before, timeout=120, interval=1.0, what=f"change {change - 1} stored")
            hub_site.files["/"] = hub_page(change + 1)
            changed = time.monotonic()
            seen = _after_beat(monitor, lambda n=change: _item_done(monitor, n))
            wait_until(seen, timeout=90, interval=1.0, what=f"change {change} stored")
            latencies.append(time.monotonic() - changed)
        backlog = Page.objects.filter(project=crawl, state="queued").count()
    print(f"\nhub changes stored after {[round(s, 1) for s in latencies]} s; the big crawl still owed {backlog}")
    assert backlog > 0, "the other project's backlog was owed throughout"
    assert max(latencies) <= LATENCY_LIMIT, latencies


def _item_done(project, number: int) -> bool:
    return Page.objects.filter(project=project, url__endswith=f"/item{number}.html", state="done").exists()


def _after_beat(project, condition):
    """`condition`, checked after what beat does for the monitor: its recrawl tick (hubs due every
    20 s) and the reaper."""

    def ticked() -> bool:
        pages_dispatch(project_id=project.id)
        reap()
        return condition()

    return ticked
