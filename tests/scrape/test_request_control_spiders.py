"""Per-request control, as pyspider's self.crawl gives it: a spider's Request names its proxy, its
rendering, a timeout, retries, a not-before time, and a priority that takes its host's next free
slot; its start() hook makes the first requests, and sign() signs each request in the fetch worker.
Seen from loopback servers, with real workers (the spiders are in tests/request_spiders.py)."""

import json
import shutil
import time

import pytest
from django.conf import settings

from core.net.guard import allow_networks
from crawl.frontier.discovery import pages_discover
from crawl.frontier.verdicts import Link
from crawl.models import Page
from crawl.services.projects import project_get_or_create
from fetch.services import pages_fetch
from scrape.models import Item
from scrape.spiders import Request
from tests.conftest import run_manage
from tests.partner_api import PartnerApi
from tests.request_spiders import PARTNER_URL_ENV
from tests.servers import Request as ServerRequest
from tests.servers import Site, SiteServer

SPIDERS = "scrape.example_spiders,tests.request_spiders"
HTML = {"Content-Type": "text/html; charset=utf-8"}
JSON = {"Content-Type": "application/json"}


def orders_page(orders: list[dict], links: tuple[str, ...] = ()) -> tuple:
    """A page whose <script id="orders"> tells the req-orders spider which requests to make."""
    script = f'<script id="orders" type="application/json">{json.dumps({"requests": orders})}</script>'
    anchors = "".join(f'<a href="{href}">{href}</a>' for href in links)
    return 200, HTML, f"<html><body>{script}{anchors}</body></html>".encode()


def page(text: str = "a page") -> tuple:
    return 200, HTML, f"<html><body><p>{text}</p></body></html>".encode()


def crawl(env: dict, project: str, url: str):
    done = run_manage(["crawl", url, "--workers", "0", "--project", project, "--timeout", "150"], env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def path_of(server: SiteServer, path: str) -> Page:
    return Page.objects.get(url=server.url + path)


def slowly(request: ServerRequest) -> tuple:
    time.sleep(2)
    return page("slow")


@pytest.mark.integration
def test_a_requests_proxy_timeout_retries_and_not_before_are_honoured_and_kept(workers, worker_env):
    env = worker_env | {"CRAWL_SPIDER_MODULES": SPIDERS}
    with SiteServer(Site(default=page("proxied"))) as proxy, SiteServer(Site()) as site:
        orders = [
            {"url": "http://127.0.0.2:9/via-proxy", "proxy": proxy.url},
            {"url": f"{site.url}/slow", "timeout": 1, "retries": 1},
            {"url": f"{site.url}/later", "not_before": 3},
        ]
        site.site.files |= {"/orders": orders_page(orders), "/slow": slowly, "/later": page()}
        project_get_or_create(
            name="orders",
            allow_private=True,
            obey_robots=False,
            spider="req-orders",
            allowed_domains="127.0.0.1\n127.0.0.2",
        )
        workers.env = env
        workers.start("all", "fetch,extract", concurrency=2)
        crawl(env, "orders", f"{site.url}/orders")
    assert [r.line for r in proxy.requests] == ["GET http://127.0.0.2:9/via-proxy HTTP/1.1"], "through its proxy"
    via_proxy = Page.objects.get(url="http://127.0.0.2:9/via-proxy")
    assert (via_proxy.state, via_proxy.request) == ("done", {"proxy": proxy.url})
    slow = path_of(site, "/slow")
    assert slow.request == {"timeout": 1.0, "retries": 1}
    assert (slow.state, slow.error_code) == ("failed", "total_timeout")
    assert "within 1 s" in slow.error_message
    assert site.paths().count("/slow") == 2, "one try and one retry"
    later = path_of(site, "/later")
    asked_at = later.created_at.timestamp()
    (fetched_at,) = [at for at, p in site.log if p == "/later"]
    assert later.state == "done" and "not_before" in later.request
    assert fetched_at >= asked_at + 2.9, "not fetched before its not_before"


def test_a_requests_own_proxy_on_a_private_address_is_refused_unless_the_project_allows_them(make_project):
    """The project's own proxy may be on a private network; one a spider names may not, unless the
    project allows private addresses (127.0.0.2 stands for a public target here)."""
    allow_networks(["127.0.0.2/32"])
    try:
        with SiteServer(Site(default=page("proxied"))) as proxy:
            project = make_project(name="own-proxy", obey_robots=False, allowed_domains="127.0.0.2")
            url = "http://127.0.0.2:9/x"
            ids = pages_discover(
                project=project, links=[Link(url, 0, request=Request(url, proxy=proxy.url).page_request())]
            )
            pages_fetch(page_ids=ids)
    finally:
        allow_networks(settings.CRAWL_ALLOWED_NETWORKS)
    refused = Page.objects.get(id=ids[0])
    assert refused.error_code == "blocked_address", refused.error_message
    assert proxy.requests == []


SCRIPTED = """<html><body><p>static</p><script>
const a = document.createElement("a"); a.href = "{href}"; a.textContent = "x"; document.body.appendChild(a);
</script></body></html>"""


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
@pytest.mark.integration
def test_render_is_chosen_per_request(workers, worker_env):
    env = worker_env | {"CRAWL_SPIDER_MODULES": SPIDERS}
    with SiteServer(Site()) as site:
        orders = [{"url": f"{site.url}/rendered", "render": True}, {"url": f"{site.url}/plain"}]
        site.site.files |= {
            "/orders": orders_page(orders),
            "/rendered": (200, HTML, SCRIPTED.format(href="/js-a").encode()),
            "/plain": (200, HTML, SCRIPTED.format(href="/js-b").encode()),
            "/js-a": page(),
            "/js-b": page(),
        }
        project_get_or_create(name="per-render", allow_private=True, obey_robots=False, spider="req-orders")
        workers.env = env
        for stage in ("fetch", "extract", "render"):
            workers.start(stage, stage, concurrency=1)
        crawl(env, "per-render", f"{site.url}/orders")
    fetched_by = {p.url.removeprefix(site.url): p.fetched_by.split("@")[0] for p in Page.objects.all()}
    assert fetched_by == {"/orders": "fetch", "/rendered": "render", "/plain": "fetch", "/js-a": "fetch"}
    assert "/js-b" not in site.paths(), "a script's link is seen only where the page was rendered"


@pytest.mark.integration
def test_a_priority_request_takes_its_hosts_next_free_slot_ahead_of_the_queued_pages(workers, worker_env):
    """A host with a 1 s delay and 34 pages queued: a request of priority 10, made while they wait,
    is among the first three requests to the host after it was made, not after all of them."""
    env = worker_env | {"CRAWL_SPIDER_MODULES": SPIDERS}
    listed = tuple(f"/p/{n}" for n in range(1, 35))
    with SiteServer(Site()) as site:
        urgent = orders_page([{"url": "/urgent", "priority": 10}])  # made by the first of them extracted
        site.site.files |= {path: urgent for path in listed}
        site.site.files |= {"/list": orders_page([], listed), "/urgent": page("urgent")}
        project_get_or_create(name="polite", allow_private=True, obey_robots=False, spider="req-orders", min_delay=1.0)
        workers.env = env
        workers.start("all", "fetch,extract", concurrency=2)
        crawl(env, "polite", f"{site.url}/list")
    made_at = path_of(site, "/urgent").created_at.timestamp()
    log = [(at, p) for at, p in site.log if at > made_at]
    position = [p for _, p in log].index("/urgent")
    assert len(log) > 20, "the test means something: most pages were still queued"
    assert position <= 2, f"/urgent was request {position + 1} after it was made: {log[: position + 1]}"


def test_a_start_hook_yields_the_first_requests_and_the_seeds_still_go(make_project, monkeypatch):
    from console.models import Job
    from console.runs.steering import crawl_start

    monkeypatch.setenv(PARTNER_URL_ENV, "http://127.0.0.1:9")
    project = make_project(name="started", spider="req-partner", allow_private=True)
    crawl_start(project=project, trigger=Job.Trigger.COMMAND, seeds={"page": ["http://127.0.0.1:9/seed"]})
    rows = {(p.url, p.request.get("method", "GET")): p for p in Page.objects.filter(project=project)}
    assert set(rows) == {
        ("http://127.0.0.1:9/seed", "GET"),
        ("http://127.0.0.1:9/api/items?page=1", "GET"),
        ("http://127.0.0.1:9/api/news", "POST"),
    }
    news = rows["http://127.0.0.1:9/api/news", "POST"]
    assert (news.is_seed, news.state, news.request["route"], news.request["body"]) == (
        True,
        "queued",
        "items",
        '{"since": 1}',
    )
    crawl_start(project=project, trigger=Job.Trigger.COMMAND)  # a second start adds nothing twice
    assert Page.objects.filter(project=project).count() == 3


PARTNER_PAGES = {
    "/api/items?page=1": {"items": [{"id": 1}], "next": "/api/items?page=2"},
    "/api/items?page=2": {"items": [{"id": 2}], "next": "/api/items?page=3"},
    "/api/items?page=3": {"items": [{"id": 3}]},
    "/api/news": {"items": [{"id": "n1"}]},
    "/api/status": {"ok": True},
}


@pytest.mark.integration
def test_a_partner_api_accepts_every_request_that_sign_made(workers, worker_env):
    api = PartnerApi(PARTNER_PAGES)
    with api.server as server:
        env = worker_env | {"CRAWL_SPIDER_MODULES": SPIDERS, PARTNER_URL_ENV: server.url}
        project_get_or_create(name="partner", allow_private=True, obey_robots=False, spider="req-partner")
        workers.env = env
        workers.start("all", "fetch,extract", concurrency=2)
        crawl(env, "partner", f"{server.url}/api/status")
    assert api.refused == []
    assert sorted(api.accepted) == [
        ("GET", "/api/items?page=1"),
        ("GET", "/api/items?page=2"),
        ("GET", "/api/items?page=3"),
        ("GET", "/api/status"),
        ("POST", "/api/news"),
    ]
    items = Item.objects.filter(project__slug="partner", kind="spider")
    assert sorted(str(i.data["id"]) for i in items) == ["1", "2", "3", "n1"]
