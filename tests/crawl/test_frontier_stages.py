"""The frontier with real workers (PostgreSQL + Redis): poison work ends failed alone, waiting work
is woken without the reaper, priorities order the fetches, and a URL trap ends at a new project's
default caps (depth, pages per host)."""

import itertools
from collections import Counter

import pytest
from django.conf import settings

from console.models import Job
from console.runs.steering import crawl_start
from crawl.models import MediaAsset, Page
from crawl.services.projects import project_get_or_create, seeds_add
from scrape.models import Item, RuleSet
from tests.conftest import last_json_line, run_manage
from tests.helpers import wait_until
from tests.servers import Site, SiteServer

pytestmark = pytest.mark.integration
HTML = {"Content-Type": "text/html; charset=utf-8"}


def html(body: str) -> tuple:
    return (200, HTML, f"<html><head><title>t</title></head><body>{body}</body></html>".encode())


def hub_site(names: list[str], extra: dict | None = None) -> Site:
    """'/' links to /<name>.html for each name; every page is plain HTML unless `extra` says."""
    site = Site()
    site.files["/robots.txt"] = (200, {"Content-Type": "text/plain"}, b"User-agent: *\n")
    site.files["/"] = html("".join(f'<a href="/{n}.html">{n}</a>' for n in names))
    for name in names:
        site.files[f"/{name}.html"] = html(f"<p>page {name}</p>")
    site.files.update(extra or {})
    return site


def crawl(project: str, url: str, env: dict, timeout: int = 200):
    args = ["crawl", f"{url}/", "--allow-private", "--json", "--workers", "0", "--project", project]
    done = run_manage([*args, "--timeout", str(timeout)], env, timeout=timeout + 60)
    assert done.returncode == 0, done.stdout + done.stderr
    return last_json_line(done.stdout)


@pytest.mark.fault
def test_poison_pages_fail_alone_and_the_crawl_completes(workers, worker_env):
    json_ld = '<script type="application/ld+json">{"name": "a\\ud800b", "price": NaN}</script>'
    names = [f"p{i}" for i in range(8)] + ["surrogate", "unstorable", "kill"]
    site = hub_site(names, {"/surrogate.html": html(json_ld + "<p>surrogate</p>")})
    env = worker_env | {"CRAWL_SPIDER_MODULES": "tests.poison_spiders", "CRAWL_FETCH_BATCH": "50"}
    project_get_or_create(name="poison", allow_private=True, spider="poison-test")
    with SiteServer(site) as server:
        workers.env = env
        workers.start("all", "fetch,extract,download")
        summary = crawl("poison", server.url, env)
    assert summary["completed"] is True
    pages = {p.url.rsplit("/", 1)[1]: p for p in Page.objects.filter(project__slug="poison")}
    assert (pages["kill.html"].state, pages["kill.html"].error_code) == ("failed", "lease_expired")
    assert pages["kill.html"].attempts == settings.CRAWL_MAX_ATTEMPTS
    assert (pages["unstorable.html"].state, pages["unstorable.html"].error_code) == ("failed", "store_error")
    others = [p for name, p in pages.items() if name not in ("kill.html", "unstorable.html")]
    assert {p.state for p in others} == {"done"}, [(p.url, p.state, p.error_code) for p in others]
    stored = Item.objects.get(page=pages["surrogate.html"], kind="page").data["json_ld"]
    assert stored == [{"name": "a\ufffdb", "price": None}], "made valid for JSONB, not refused"


@pytest.mark.fault
def test_a_download_over_the_hard_time_limit_fails_after_the_attempt_cap(workers, worker_env):
    site = hub_site([], {"/slow.jpg": (200, {"Content-Type": "image/jpeg"}, b"\xff\xd8" + bytes(1_000_000))})
    site.files["/"] = html('<img src="/slow.jpg">')
    site.slow["/slow.jpg"] = 1.0  # a second between 64 KiB chunks: 16 s, over the 3 s hard limit
    env = worker_env | {
        "CRAWL_DOWNLOAD_TIME_LIMIT": "3",
        "CRAWL_DOWNLOAD_SOFT_TIME_LIMIT": "60",
        "CRAWL_MEDIA_TOTAL_TIMEOUT": "120",
        "CRAWL_READ_TIMEOUT": "10",
    }
    with SiteServer(site) as server:
        workers.env = env
        workers.start("all", "fetch,extract,download")
        summary = crawl("slow", server.url, env, timeout=240)
        downloads = Counter(server.paths())["/slow.jpg"]
    asset = MediaAsset.objects.get(project__slug="slow")
    assert (asset.state, asset.error_code, asset.attempts) == ("failed", "lease_expired", settings.CRAWL_MAX_ATTEMPTS)
    assert downloads == settings.CRAWL_MAX_ATTEMPTS
    assert summary["completed"] is True
    assert Page.objects.get(project__slug="slow").state == "done", "the page does not wait for a failed asset"


def _wait_until_done(project, count: int, timeout: float) -> None:
    def states() -> str:
        found = Counter(Page.objects.filter(project=project).values_list("state", flat=True))
        return f"{count} pages done: {dict(found)}"

    done = Page.objects.filter(project=project, state="done")
    wait_until(lambda: done.count() >= count, timeout=timeout, interval=0.3, what=states)


def test_postponed_pages_are_woken_without_the_reaper(workers, worker_env):
    """Politeness grants each batch a few slots and postpones the rest; no beat, no crawl command,
    no reaper runs here, so only the wake-up messages can bring the postponed pages back."""
    names = [f"p{i}" for i in range(16)]
    with SiteServer(hub_site(names)) as server:
        project = project_get_or_create(name="polite", allow_private=True, min_delay=0.5)
        seeds_add(project=project, urls=[f"{server.url}/"])
        workers.start("all", "fetch,extract,download")
        crawl_start(project=project, trigger=Job.Trigger.COMMAND)
        _wait_until_done(project, len(names) + 1, timeout=90)
    starts = sorted(t for t, path in server.log if path.endswith(".html"))
    assert starts[-1] - starts[0] > 3 * 0.5, "the pages were spread over several politeness windows"
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 0.5, "never closer than min_delay"


def test_priorities_order_the_fetches(workers, worker_env):
    names = [f"p{i}" for i in range(10)]
    with SiteServer(hub_site(names)) as server:
        project = project_get_or_create(name="prio", allow_private=True, concurrency=1, max_per_host=1)
        RuleSet.objects.create(project=project, name="all", spec={"follow": [r"/p\d\.html"]})
        RuleSet.objects.create(project=project, name="urgent", spec={"follow": [r"/p[7-9]\.html"], "priority": 10})
        seeds_add(project=project, urls=[f"{server.url}/"])
        workers.start("all", "fetch,extract,download")
        crawl_start(project=project, trigger=Job.Trigger.COMMAND)
        _wait_until_done(project, len(names) + 1, timeout=90)
        order = [path for path in server.paths() if path.endswith(".html")]
    assert sorted(order[:3]) == ["/p7.html", "/p8.html", "/p9.html"], order
    assert sorted(order[3:]) == [f"/p{i}.html" for i in range(7)]
    urgent = Page.objects.filter(project=project, priority=10).values_list("url", flat=True)
    assert sorted(u.rsplit("/", 1)[1] for u in urgent) == ["p7.html", "p8.html", "p9.html"]


class TrapPages(dict):
    """Pages made up on request: /next/N links to /next/N+1, and /wide/N to ten new pages, for ever."""

    def get(self, path, default=None):
        kind, _, n = path.strip("/").partition("/")
        if kind not in ("next", "wide") or not n.isdigit():
            return (404, HTML, b"") if path == "/robots.txt" else default
        later = [int(n) + 1] if kind == "next" else range(int(n) * 10 + 1, int(n) * 10 + 11)
        links = "".join(f'<a href="/{kind}/{m}">{m}</a>' for m in later)
        return 200, HTML, f"<html><body><h1>{kind} {n}</h1>{links}</body></html>".encode()


def trap_crawl(env, url: str, project: str) -> None:
    done = run_manage(["crawl", url, "--workers", "0", "--project", project, "--timeout", "240"], env)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.integration
def test_an_endless_chain_of_next_links_stops_at_the_default_depth(workers, worker_env, settings):
    site = Site(files=TrapPages())
    with SiteServer(site) as server:
        project = project_get_or_create(name="chain-trap", allow_private=True, download_media=False)
        for stage in ("fetch", "extract"):
            workers.start(stage, stage, concurrency=1)
        trap_crawl(worker_env, f"{server.url}/next/0", "chain-trap")
    depth = settings.CRAWL_DEFAULT_MAX_DEPTH
    fetched = sorted(int(p.rsplit("/", 1)[1]) for p in set(server.paths()) if p.startswith("/next/"))
    assert fetched == list(range(depth + 1))
    assert Page.objects.filter(project=project).count() == depth + 1


@pytest.mark.integration
def test_a_trap_that_fans_out_stops_at_the_default_per_host_cap(workers, worker_env, settings):
    settings.CRAWL_DEFAULT_MAX_PAGES_PER_HOST = 40  # the default a new project takes (100,000 unless set)
    site = Site(files=TrapPages())
    with SiteServer(site) as server:
        project = project_get_or_create(name="fan-trap", allow_private=True, download_media=False)
        assert project.max_pages_per_host == 40
        for stage in ("fetch", "extract"):
            workers.start(stage, stage, concurrency=1)
        trap_crawl(worker_env, f"{server.url}/wide/0", "fan-trap")
    assert Page.objects.filter(project=project).count() == 40
    assert len({p for p in server.paths() if p.startswith("/wide/")}) == 40
