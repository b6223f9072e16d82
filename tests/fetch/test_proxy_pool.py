"""A project's proxy pool: in a crawl by real workers, two forward proxies on loopback, one of them
broken (it answers 502 itself): the crawl completes through the good one, the broken one is rested
and tried again, and every page names the proxy it went through. In one process: a proxy that
refuses connections, a pool that rests whole, and what the block detector reports."""

import itertools
import socket
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from core.canonical import server_of
from crawl.models import Host, Page, ProjectProxy
from crawl.services.projects import project_get_or_create, seeds_add
from fetch.proxy_pool import proxy_outcome, proxy_state
from fetch.services import pages_fetch
from tests.conftest import last_json_line, run_manage
from tests.servers import ForwardProxy, Site, SiteServer

HTML = {"Content-Type": "text/html; charset=utf-8"}
PAGES = 30
REST_SECONDS = 1.0
PASSWORD = "pool-s3cret"
TIMEOUT = ("--timeout", "120")


def page(*links: str) -> tuple:
    return (200, HTML, ("<html><body>" + "".join(f'<a href="{h}">{h}</a>' for h in links) + "</body></html>").encode())


def closed_port() -> int:
    """A loopback port nothing listens on: connections to it are refused."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        return listener.getsockname()[1]


@pytest.mark.integration
def test_the_crawl_completes_through_the_good_proxy_and_the_broken_one_rests_then_is_retried(workers, worker_env):
    site = Site(files={"/": page(*(f"/p{i}" for i in range(PAGES)))} | {f"/p{i}": page() for i in range(PAGES)})
    good, failing = ForwardProxy(username="crawler", password=PASSWORD), ForwardProxy(failing=502)
    # The spacing makes the crawl last past the broken proxy's first rest.
    project = project_get_or_create(name="pooled", allow_private=True, obey_robots=False, min_delay=0.15)
    bad = ProjectProxy.objects.create(project=project, url=failing.url())  # first in turn
    ProjectProxy.objects.create(project=project, url=good.url(credentials=f"crawler:{PASSWORD}"))
    env = worker_env | {"CRAWL_PROXY_ERRORS_TO_REST": "2", "CRAWL_PROXY_REST_SECONDS": str(REST_SECONDS)}
    workers.env = env
    for stage in ("fetch", "extract", "download"):
        workers.start(stage, stage)
    try:
        with SiteServer(site) as server:
            done = run_manage(
                [
                    "crawl",
                    f"{server.url}/",
                    "--allow-private",
                    "--workers",
                    "0",
                    "--json",
                    "--project",
                    "pooled",
                    *TIMEOUT,
                ],
                env,
            )
            served = server.paths()
    finally:
        good.close()
        failing.close()
    assert done.returncode == 0, done.stdout + done.stderr
    summary, pages = last_json_line(done.stdout), Page.objects.filter(project=project)
    bad.refresh_from_db()
    gaps = [b - a for a, b in itertools.pairwise(failing.times)]
    print(
        f"\nbroken proxy (answers 502): {bad.errors} errors, rested {bad.rests_in_row} times in a row, "
        f"score {bad.score:.0f}; good proxy carried {len(good.requests)} requests for {len(served)} served; "
        f"the broken one's longest quiet gap {max(gaps, default=0):.2f} s"
    )
    assert summary["pages_fetched"] == PAGES + 1
    assert sorted(pages.values_list("state", flat=True).distinct()) == ["done"]
    shown = f"http://crawler:***@127.0.0.1:{good.port}"
    assert set(pages.values_list("proxy", flat=True)) == {shown}, "every page names the good proxy, masked"
    assert len(served) == len(good.requests) == PAGES + 1, "every request that reached the site came through it"
    assert bad.errors >= 2 and bad.rests_in_row >= 2, "rested, tried again after its rest, and rested again"
    assert proxy_state(bad) in ("resting", "on trial")
    assert max(gaps) >= REST_SECONDS, "its own log: silence for its rest, then a trial request"


@pytest.fixture
def recorder():
    with SiteServer(Site(default=page())) as server:
        yield server


def pooled_project(*urls: str, **fields):
    project = project_get_or_create(name="pool", allow_private=True, obey_robots=False, **fields)
    return project, [ProjectProxy.objects.create(project=project, url=url) for url in urls]


def test_a_page_whose_proxy_refuses_goes_again_through_another_without_spending_an_attempt(db, recorder, settings):
    settings.CRAWL_PROXY_ERRORS_TO_REST = 2
    good = ForwardProxy()
    try:
        project, (dead, _) = pooled_project(f"http://127.0.0.1:{closed_port()}", good.url())
        ids = seeds_add(project=project, urls=[f"{recorder.url}/p{i}" for i in range(4)])
        first = pages_fetch(page_ids=ids)
        again = [i for i in ids if i not in first]
        rows = Page.objects.filter(id__in=again)
        waiting = {(p.state, p.error_code, p.attempts, p.proxy) for p in rows}
        second = pages_fetch(page_ids=again)
    finally:
        good.close()
    dead.refresh_from_db()
    assert len(first) == 2 and sorted(second) == sorted(again), "in turn, then through the good one"
    assert waiting == {("queued", "proxy_error", 0, dead.url)}, "sent again, no attempt spent, the proxy named"
    assert (dead.errors, proxy_state(dead)) == (2, "resting")
    assert "cannot connect to the proxy 127.0.0.1" in dead.last_error
    assert Host.objects.get(host=server_of(recorder.url)).failures == 0, "a dead proxy is not a dead site"
    assert set(Page.objects.filter(id__in=ids).values_list("proxy", flat=True)) == {good.url()}


def test_when_every_proxy_rests_the_pages_wait_for_the_first_one_back(db, recorder):
    project, (proxy,) = pooled_project("http://127.0.0.1:9")
    back = timezone.now() + timedelta(minutes=5)
    ProjectProxy.objects.filter(id=proxy.id).update(rested_until=back, rests_in_row=1)
    ids = seeds_add(project=project, urls=[f"{recorder.url}/a"])
    assert pages_fetch(page_ids=ids) == []
    row = Page.objects.get(id=ids[0])
    assert (row.state, row.error_code, row.attempts, row.next_fetch_at) == ("queued", "proxy_resting", 0, back)
    assert recorder.requests == [], "never sent without a proxy"


def test_blocks_reported_by_the_block_detector_rest_a_proxy_and_its_errors_are_masked(db, settings):
    settings.CRAWL_PROXY_ERRORS_TO_REST, settings.CRAWL_PROXY_REST_SECONDS = 2, 30
    _, (proxy,) = pooled_project(f"http://u:{PASSWORD}@proxy.test:3128")
    proxy_outcome(proxy, "ok", 0.2)
    proxy_outcome(proxy.id, "blocked", 0.1)
    now = proxy_outcome(proxy, "error", 0.3, error=f"the proxy http://u:{PASSWORD}@proxy.test:3128 failed")
    assert (now.uses, now.errors, now.blocks, now.latency_ms) == (3, 1, 1, pytest.approx(200))
    assert proxy_state(now) == "resting" and now.rested_until > timezone.now() + timedelta(seconds=25)
    assert PASSWORD not in now.last_error and PASSWORD not in str(now)
    with pytest.raises(ValueError):
        proxy_outcome(proxy, "banned")


def test_a_pool_proxy_must_be_an_http_url_and_the_refusal_does_not_quote_it(db):
    project, _ = pooled_project()
    proxy = ProjectProxy(project=project, url=f"socks5://u:{PASSWORD}@proxy.test:1080")
    with pytest.raises(ValidationError) as refused:
        proxy.full_clean()
    assert PASSWORD not in str(refused.value)


def test_a_block_page_counts_against_the_proxy_that_carried_it(db):
    captcha = (200, {"Content-Type": "text/html"}, b"<html><title>Sorry</title><body>rate limited</body></html>")
    proxy = ForwardProxy()
    try:
        with SiteServer(Site(default=captcha)) as site:
            project, (pooled,) = pooled_project(proxy.url(), block_rules=[{"regex": "rate limited"}])
            ids = seeds_add(project=project, urls=[f"{site.url}/a"])
            pages_fetch(page_ids=ids)
    finally:
        proxy.close()
    pooled.refresh_from_db()
    assert (pooled.uses, pooled.blocks, pooled.errors, pooled.errors_in_row) == (1, 1, 0, 1)
    assert Page.objects.get(id=ids[0]).proxy == proxy.url()


def test_with_proxy_per_session_each_session_goes_through_one_proxy_batch_after_batch(db, recorder):
    """Two sessions, three proxies: in turn, a session's pages would go through every proxy; with
    proxy_per_session each session keeps one, over several batches (the pool's order changes as
    proxies are used)."""
    proxies = [ForwardProxy() for _ in range(3)]
    try:
        project, _ = pooled_project(*(p.url() for p in proxies), keep_cookies=True, session_pool_size=2)
        project.proxy_per_session = True
        project.save(update_fields=["proxy_per_session"])
        for batch in range(3):
            ids = seeds_add(project=project, urls=[f"{recorder.url}/b{batch}p{i}" for i in range(6)])
            assert sorted(pages_fetch(page_ids=ids)) == sorted(ids)
    finally:
        for proxy in proxies:
            proxy.close()
    rows = Page.objects.filter(project=project).values_list("cookie_session_id", "proxy")
    by_session = {}
    for session, proxy in rows:
        by_session.setdefault(session, set()).add(proxy)
    assert len(by_session) == 2 and None not in by_session, by_session
    assert all(len(used) == 1 for used in by_session.values()), by_session
    assert len(rows) == 18
