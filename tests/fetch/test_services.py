"""Politeness across real workers: Crawl-delay shared by two fetch workers, 429 Retry-After, and
conditional GET on a recrawl. Timings are read from the test server's own request log."""

import itertools

import pytest

from crawl.models import Page, PageContent
from scrape.models import Item
from tests.conftest import last_json_line, run_manage
from tests.servers import Site, SiteServer

pytestmark = pytest.mark.integration
HTML = {"Content-Type": "text/html; charset=utf-8"}


def page(*links: str) -> tuple:
    return (200, HTML, ("<html><body>" + "".join(f'<a href="{h}">{h}</a>' for h in links) + "</body></html>").encode())


def start(workers, env, fetchers=("fetch",)):
    workers.env = env
    for name in fetchers:
        workers.start(name, "fetch")
    workers.start("extract", "extract")
    workers.start("download", "download")


def crawl(env, url, project, *extra):
    done = run_manage(
        [
            "crawl",
            f"{url}/",
            "--allow-private",
            "--workers",
            "0",
            "--json",
            "--project",
            project,
            "--timeout",
            "200",
            *extra,
        ],
        env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return last_json_line(done.stdout)


def page_times(server) -> list[float]:
    return sorted(t for t, path in server.log if path != "/robots.txt")


def test_two_fetch_workers_keep_the_crawl_delay_between_any_two_requests(workers, worker_env):
    site = Site()
    site.files["/robots.txt"] = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nCrawl-delay: 1\n")
    site.files["/"] = page(*(f"/p{i}.html" for i in range(8)))
    for i in range(8):
        site.files[f"/p{i}.html"] = page()
    with SiteServer(site) as server:
        # One claim per wake-up (no session), so both workers take turns at the host.
        start(
            workers, worker_env | {"CRAWL_FETCH_BATCH": "2", "CRAWL_FETCH_SESSION_SECONDS": "0"}, ("fetch-a", "fetch-b")
        )
        summary = crawl(worker_env | {"CRAWL_FETCH_BATCH": "2"}, server.url, "polite")
        times = page_times(server)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    print(f"\ncrawl-delay 1 s: {len(times)} requests, smallest gap {min(gaps):.3f} s")
    assert summary["pages_fetched"] == 9
    assert len(times) == 9
    assert min(gaps) >= 1.0
    workers_used = set(Page.objects.filter(project__slug="polite").values_list("fetched_by", flat=True))
    assert {w.split("@")[0] for w in workers_used} == {"fetch-a", "fetch-b"}


def test_a_429_with_retry_after_holds_every_request_to_the_host_back(workers, worker_env):
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    site.files["/"] = page("/a")
    site.files["/a"] = page("/b", "/c")
    site.once["/a"] = (429, {"Retry-After": "5", "Content-Type": "text/plain"}, b"slow down")
    site.files["/b"] = page()
    site.files["/c"] = page()
    with SiteServer(site) as server:
        start(workers, worker_env)
        summary = crawl(worker_env, server.url, "backoff")
        log = sorted(server.log)
    refused_at = next(t for t, path in log if path == "/a")
    after = [t for t, _ in log if t > refused_at]
    print(f"\n429 Retry-After 5: next request {after[0] - refused_at:.2f} s later")
    assert summary["pages_fetched"] == 4
    assert after[0] - refused_at >= 5
    assert Page.objects.get(project__slug="backoff", url__endswith="/a").attempts == 1, "a 429 costs no attempt"


def test_a_recrawl_of_unchanged_pages_sends_validators_and_stores_nothing_new(workers, worker_env):
    site = Site(etags=True)
    site.files["/robots.txt"] = (404, HTML, b"")
    site.files["/"] = page("/x.html", "/y.html")
    site.files["/x.html"] = page()
    site.files["/y.html"] = page()
    with SiteServer(site) as server:
        start(workers, worker_env)
        crawl(worker_env, server.url, "cond")
        before = {
            "contents": {c.page_id: bytes(c.body) for c in PageContent.objects.filter(page__project__slug="cond")},
            "items": dict(Item.objects.filter(project__slug="cond").values_list("id", "updated_at")),
        }
        server.headers.clear()
        summary = crawl(worker_env, server.url, "cond", "--recrawl")
        sent = [h for path, h in server.headers if path != "/robots.txt"]
    assert summary["pages_fetched"] == 3
    assert len(sent) == 3
    assert all(h.get("If-None-Match", "").startswith('"') and h.get("If-Modified-Since") for h in sent)
    pages = Page.objects.filter(project__slug="cond")
    assert all(p.not_modified_at is not None and p.status_code == 200 for p in pages)
    contents = {c.page_id: bytes(c.body) for c in PageContent.objects.filter(page__project__slug="cond")}
    assert contents == before["contents"]
    assert dict(Item.objects.filter(project__slug="cond").values_list("id", "updated_at")) == before["items"]
