"""Extract and download pull their work from the rows like fetch: a message is a wake-up, so a lost
one, or a PostgreSQL connection dropped mid-crawl, costs the next wake-up (seconds), not
CRAWL_REPUBLISH_SECONDS. Real workers, a real Redis broker and real PostgreSQL; where queued work
alone is lost, republishing is set to five minutes, so nothing may wait for it."""

import subprocess
import sys
import threading
import time
import zlib
from datetime import timedelta

import pytest
import redis
from django.db import connection
from django.db.models import F
from django.utils import timezone

from bench.check import assert_complete
from crawl.frontier.stages import EXTRACT, FETCH
from crawl.models import MediaAsset, Page, PageContent
from crawl.services.projects import project_get_or_create, seeds_add
from crawl.tasks import reap_task
from tests.conftest import BASE_DIR, export_pages
from tests.helpers import wait_until
from tests.media.test_media_politeness import NO_ROBOTS, gallery_site
from tests.servers import SiteServer
from tests.system.test_distributed import crawl_args

pytestmark = pytest.mark.integration
SLOW_REPUBLISH = {"CRAWL_REPUBLISH_SECONDS": "300"}


def fetched_page(project, url: str, body: bytes) -> Page:
    """A page the fetch stage finished (its extract message then lost): `fetched`, its body stored."""
    (page_id,) = seeds_add(project=project, urls=[url])
    Page.objects.filter(id=page_id).update(
        state="fetched", lease_token=None, enqueued_at=timezone.now(), status_code=200, attempts=0
    )
    headers = {"content-type": "text/html; charset=utf-8"}
    PageContent.objects.create(page_id=page_id, headers=headers, body=zlib.compress(body))
    return Page.objects.get(id=page_id)


def reap_until(done, *, what, deadline: float = 60) -> None:
    """Send the reaper every few seconds, as beat does, until done() or the deadline."""
    last = float("-inf")

    def reaped():
        nonlocal last
        if done():
            return True
        if time.monotonic() - last >= 5:
            reap_task.apply_async(queue="control")
            last = time.monotonic()
        return False

    wait_until(reaped, timeout=deadline, interval=0.2, what=what)


def test_fetched_pages_and_queued_assets_whose_messages_were_lost_are_taken_by_the_next_wake_up(
    workers, worker_env, broker
):
    with SiteServer(gallery_site(2, robots=NO_ROBOTS)) as server:
        project = project_get_or_create(name="lost", allow_private=True)
        tags = "".join(f'<img src="/img/{i}.png">' for i in range(2))
        page = fetched_page(project, f"{server.url}/", f"<html><body>{tags}</body></html>".encode())
        (lost_asset,) = [
            MediaAsset.objects.create(
                project=project, url=f"{server.url}/img/lost.png", url_key="9" * 64, enqueued_at=timezone.now()
            )
        ]
        server.site.files["/img/lost.png"] = server.site.files["/img/0.png"]
        redis.Redis.from_url(broker).delete(EXTRACT, "download")  # the messages are lost
        workers.env = worker_env | SLOW_REPUBLISH
        workers.start("stages", "extract,download")
        assets = MediaAsset.objects.filter(project=project)
        reap_until(
            lambda: Page.objects.get(id=page.id).state == "done" and not assets.exclude(state="done").exists(),
            what=lambda: str([(a.url, a.state, a.error_code) for a in assets] + [Page.objects.get(id=page.id).state]),
        )
    assert assets.count() == 3 and lost_asset.id in {a.id for a in assets}


def drop_connections(times: int, every: float, stop: threading.Event) -> list[int]:
    """Terminate every other session of the test database `times` times, `every` seconds apart (a
    PostgreSQL restart as the workers and the crawl command see it). Returns sessions dropped each time."""
    dropped = []
    with connection.cursor() as cursor:
        for _ in range(times):
            if stop.wait(every):
                break
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            dropped.append(cursor.fetchone()[0])
    return dropped


@pytest.mark.fault
def test_a_crawl_whose_database_connections_drop_midway_goes_on_within_seconds(site, truth, workers, worker_env):
    """Every PostgreSQL session of the workers and the crawl command is cut three times mid-crawl:
    messages whose task hit a dead connection are lost, and the crawl still ends complete. Queued
    work is taken by the next wake-up; a suspect (a row a failed batch held, sent alone) whose own
    message was lost waits for the shipped resend, CRAWL_REPUBLISH_SECONDS (30)."""
    env = worker_env | {"CRAWL_REPUBLISH_SECONDS": "30"}
    with SiteServer.generated(site, delay=0.05) as server:
        workers.env = env
        for stage in (FETCH, EXTRACT, "download"):
            workers.start(stage, stage)
        crawl = subprocess.Popen(
            [sys.executable, "manage.py", *crawl_args(server.url, "drops")[:-1], "150"],
            cwd=BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        done = Page.objects.filter(project__slug="drops", state="done")
        wait_until(lambda: done.count() >= 20, timeout=60, what="20 pages done")
        stop = threading.Event()
        dropped = drop_connections(3, 1.5, stop)
        out, err = crawl.communicate(timeout=200)
        stop.set()
        assert crawl.returncode == 0, out[-3000:] + err[-3000:]
        rows = export_pages(env, "drops")
        assert_complete(rows, truth, server.paths())
    print(f"\nsessions dropped: {dropped}")
    assert all(n > 0 for n in dropped) and len(dropped) == 3
    assert not MediaAsset.objects.filter(project__slug="drops").exclude(state="done").exists()


def due_now(project, host: str) -> None:
    """Move the clock on: the project's queued pages and its host's next slot are due now."""
    from crawl.models import Host

    Page.objects.filter(project=project, state="queued").update(next_fetch_at=timezone.now())
    Host.objects.filter(host=host).update(backoff_until=None, next_allowed_at=timezone.now(), slotted_until=None)


def test_a_hub_down_for_three_minutes_is_fetched_again_and_its_crawl_goes_on(db, settings):
    """A monitored project's hub answers 503 for three minutes (the clock driven by moving its due
    time, at the shipped retry schedule): it is never given up, and once the site is back the hub
    is fetched and extracted, and the page it links to is fetched."""
    from core.canonical import server_of
    from crawl.models import Host
    from fetch.services import pages_fetch
    from scrape.services import pages_extract

    settings.CRAWL_FETCH_SESSION_SECONDS, settings.CRAWL_RETRY_BASE_SECONDS = 0, 30.0
    down = {"on": True}
    site = gallery_site(0, robots=NO_ROBOTS)
    hub = (200, {"Content-Type": "text/html"}, b'<html><body><a href="/news/1">news</a></body></html>')
    site.files["/"] = lambda request: (503, {"Content-Type": "text/plain"}, b"down") if down["on"] else hub
    site.files["/news/1"] = (200, {"Content-Type": "text/html"}, b"<html><body>news</body></html>")
    with SiteServer(site) as server:
        project = project_get_or_create(name="monitored", allow_private=True, recrawl_every_minutes=60)
        (hub_id,) = seeds_add(project=project, urls=[f"{server.url}/"])
        waited, rounds = 0.0, 0
        for _ in range(200):
            if waited >= 180:
                break
            before = server.paths().count("/")
            pages_fetch(page_ids=[], worker="t")
            row = Page.objects.get(id=hub_id)
            asked_now = server.paths().count("/") - before  # a round on a busy machine may claim nothing
            assert asked_now <= 1, "the hub was asked twice in one round"
            if asked_now and row.status_code == 503:  # it was asked, and waits: the clock moves on to its due time
                assert row.state == "queued", (row.state, row.error_code)
                wait = max(0.0, (row.next_fetch_at - timezone.now()).total_seconds())
                waited, rounds = waited + wait, rounds + 1
                older = F("throttle_since") - timedelta(seconds=wait)  # its throttling incident is older too
                Host.objects.filter(host=server_of(server.url)).update(throttle_since=older)
            due_now(project, server_of(server.url))
        down["on"] = False

        def news_done() -> bool:
            if Page.objects.filter(project=project, url__endswith="/news/1", state="done").exists():
                return True
            pages_fetch(page_ids=[], worker="t")
            pages_extract(page_ids=[], worker="t")
            due_now(project, server_of(server.url))  # the host slowed down after the 503s: its slots come now
            return False

        wait_until(
            news_done,
            timeout=30,
            interval=0.1,
            what=lambda: str(list(Page.objects.filter(project=project).values_list("url", "state"))),
        )
        asked = server.paths().count("/")
    print(f"\nhub down: {rounds} answers of 503 over {waited:.0f} s of its schedule")
    assert waited >= 180 and asked == rounds + 1
    assert Page.objects.get(id=hub_id).state in ("done", "extracted")


def test_a_fetch_wake_up_after_the_extract_backlog_cleared_fetches_at_once(db, settings, monkeypatch):
    """An extract batch that brings its project back under the backlog wakes the fetch stage: the
    process the wake-up reaches counted the backlog a moment before (it keeps that count a while),
    yet it fetches the project's due page now."""
    from crawl.frontier import pages as frontier_pages
    from fetch.services import pages_fetch

    monkeypatch.setattr(frontier_pages, "BACKLOG_SECONDS", 3600)
    settings.CRAWL_FETCH_SESSION_SECONDS, settings.CRAWL_EXTRACT_BATCH = 0, 2
    backlog = frontier_pages.EXTRACT_BACKLOG * settings.CRAWL_EXTRACT_BATCH
    with SiteServer(gallery_site(0, robots=NO_ROBOTS)) as server:
        project = project_get_or_create(name="resumed", allow_private=True)
        waiting = seeds_add(project=project, urls=[f"{server.url}/waiting/{i}" for i in range(backlog + 1)])
        Page.objects.filter(id__in=waiting).update(state="fetched", enqueued_at=timezone.now())
        (due_id,) = seeds_add(project=project, urls=[f"{server.url}/"])
        frontier_pages.backlog_recount()
        pages_fetch(page_ids=[], worker="t")  # counted now: the project is backlogged
        assert Page.objects.get(id=due_id).state == "queued" and server.paths() == []
        Page.objects.filter(id__in=waiting).update(state="done")  # extracted meanwhile
        pages_fetch(page_ids=[], worker="t", wake=timezone.now().isoformat())
        assert "/" in server.paths()
    assert Page.objects.get(id=due_id).state == "fetched"


def test_an_extract_wake_up_shares_its_batch_between_projects_and_leaves_suspects_alone(db):
    """A project owing many fetched pages does not fill the batch: the other's pages are in it. A
    page a dead worker held among others (suspect) is left to its own message."""
    from crawl.frontier.pages import pages_claim_ready_for_extract

    big, small = (project_get_or_create(name=n, allow_private=True) for n in ("big", "small"))
    big_ids = seeds_add(project=big, urls=[f"http://big.test/{i}" for i in range(30)])
    small_ids = seeds_add(project=small, urls=["http://small.test/a", "http://small.test/b"])
    Page.objects.filter(id__in=big_ids + small_ids).update(state="fetched", lease_token=None)
    Page.objects.filter(id=big_ids[0]).update(suspect=True)
    _, claimed = pages_claim_ready_for_extract(limit=10, worker="w")
    by_project = [p.project_id for p in claimed]
    assert len(claimed) == 10 and by_project.count(small.id) == 2 and by_project.count(big.id) == 8
    assert big_ids[0] not in {p.id for p in claimed}
    _, again = pages_claim_ready_for_extract(limit=10, worker="w")
    assert not {p.id for p in claimed} & {p.id for p in again}, "a claimed page is not claimed twice"


def test_a_download_claim_shares_its_batch_between_projects(db):
    from media.claims import assets_claim_round

    big, small = (project_get_or_create(name=n, allow_private=True) for n in ("big-media", "small-media"))
    for i in range(20):
        MediaAsset.objects.create(project=big, url=f"http://b{i}.test/x.png", url_key=f"{i:064d}")
    MediaAsset.objects.create(project=small, url="http://s.test/x.png", url_key="s" * 64)
    claim = assets_claim_round([], limit=5, worker="w")
    assert sorted(a.project_id for a in claim.assets) == sorted([big.id] * 4 + [small.id])
    assert all(a.state == "leased" for a in MediaAsset.objects.filter(id__in=[a.id for a in claim.assets]))


def test_extract_and_download_book_one_wake_up_per_queue(db, broker):
    """However many fetched pages and queued assets are announced, each queue gets one wake-up
    message (no ids) until that one runs."""
    from crawl.frontier.stages import publish_download, publish_extract

    for n in range(5):
        publish_extract([n + 1, n + 100])
        publish_download([n + 1])
    client = redis.Redis.from_url(broker)
    assert (client.llen(EXTRACT), client.llen("download")) == (1, 1)
