"""Back-off that forgives, across real workers and loopback sites: a burst refused with 429/503 is
one incident and is forgiven, and a monitored site that comes back is fetched at once. Timings are
read from the servers' own request logs."""

import itertools
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from console.health.models import Alert, Monitor
from core.canonical import server_of
from crawl.frontier.recrawl import pages_recrawl_all
from crawl.models import Host, Page
from crawl.services.projects import project_get_or_create
from tests.conftest import BASE_DIR, beat_stop, last_json_line, run_manage
from tests.helpers import wait_until
from tests.servers import Site, SiteServer

pytestmark = pytest.mark.integration
HTML = {"Content-Type": "text/html; charset=utf-8"}
DELAY = 0.25  # the project's configured delay between two requests to the host


def page(*links: str) -> tuple:
    return (200, HTML, ("<html><body>" + "".join(f'<a href="{h}">{h}</a>' for h in links) + "</body></html>").encode())


def refused_twice(answer: tuple, asked: Counter, lock: threading.Lock, latency: float = 1.0):
    """Refuse a URL twice (429, then 503, no Retry-After; slowly, like an overloaded server), then answer."""

    def route(request):
        with lock:
            asked[request.path] += 1
            count = asked[request.path]
        if count > 2:
            return answer
        time.sleep(latency)
        return ((429, 503)[count - 1], {"Content-Type": "text/plain"}, b"busy")

    return route


def crawl(env: dict, url: str, project: str, *extra: str) -> dict:
    args = ["crawl", f"{url}/", "--allow-private", "--workers", "0", "--json", "--project", project]
    done = run_manage([*args, "--timeout", "200", *extra], env)
    assert done.returncode == 0, done.stdout + done.stderr
    return last_json_line(done.stdout)


def page_times(server: SiteServer, since: float = 0.0) -> list[float]:
    return sorted(t for t, path in server.log if path != "/robots.txt" and t >= since)


def test_a_burst_refused_with_429_and_503_is_one_incident_and_is_forgiven(workers, worker_env):
    """9 pages, 8 in flight, each URL refused twice without Retry-After: the crawl ends within a
    minute, no two requests closer than the configured delay, and after a quiet period (shortened
    here) a recrawl goes at the configured delay again."""
    asked, lock = Counter(), threading.Lock()
    links = [f"/p{i}.html" for i in range(8)]
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    site.files["/"] = refused_twice(page(*links), asked, lock)
    for link in links:
        site.files[link] = refused_twice(page(), asked, lock)
    quiet = 3.0
    env = worker_env | {"CRAWL_THROTTLE_FORGIVE_SECONDS": str(quiet)}
    project_get_or_create(name="burst", allow_private=True, min_delay=DELAY, max_per_host=8, concurrency=8)
    with SiteServer(site) as server:
        workers.env = env
        workers.start("fetch", "fetch")
        workers.start("extract", "extract")
        summary = crawl(env, server.url, "burst")
        times = page_times(server)
        refusals = sum(min(n, 2) for n in asked.values())
        time.sleep(max(0.0, times[-1] + quiet - time.time()) + 0.5)  # the quiet period, from the last request
        recrawl_from = time.time()
        again = crawl(env, server.url, "burst", "--recrawl")
        recrawled = page_times(server, since=recrawl_from)
    took, gaps = times[-1] - times[0], [b - a for a, b in itertools.pairwise(times)]
    regaps = [b - a for a, b in itertools.pairwise(recrawled)]
    in_flight = max(sum(t <= u < t + 1.0 for u in times) for t in times[:9])  # refusals take a second
    print(f"\n429/503 burst: {len(times)} requests ({refusals} refused), up to {in_flight} in flight")
    print(f"crawl took {took:.1f} s, smallest gap {min(gaps):.3f} s")
    print(f"after {quiet:g} s quiet: recrawl of {len(recrawled)} pages, gaps {min(regaps):.3f}-{max(regaps):.3f} s")
    assert summary["pages_fetched"] == 9 and refusals == 18 and len(times) == 27
    assert took < 60, "one incident per burst: not minutes"
    assert min(gaps) >= DELAY, "never closer than the configured delay"
    assert again["pages_fetched"] == 9 and len(recrawled) == 9
    assert min(regaps) >= DELAY and max(regaps) < DELAY + 1.0, "forgiven: back at the configured delay"
    assert Host.objects.get(host=server_of(server.url)).throttle_delay == 0.0


def monitored_outage(workers, env: dict, *, down_for: float, monitor: dict, timeout: float) -> dict:
    """A monitored site (recrawl every minute, everything) crawled, then down (its server gone:
    connections refused) until its pages wait on their long retries and the site-down alert is open,
    and for `down_for` seconds at least; then back on the same port. Returns the seconds from its
    return until each page was asked again and until the alert recovered."""
    links = ["/a", "/b", "/c"]
    site = Site(files={"/robots.txt": (404, HTML, b""), "/": page(*links)} | {link: page() for link in links})
    project = project_get_or_create(
        name="watched", allow_private=True, recrawl_every_minutes=1, recrawl_mode="all", max_depth=1
    )
    Monitor.objects.update_or_create(project=project, kind=Monitor.Kind.SITE_DOWN, defaults={"thresholds": monitor})
    workers.env = env
    workers.start("fetch", "fetch")
    workers.start("extract", "extract")
    with SiteServer(site) as server:
        crawl(env, server.url, "watched")
        port, url = server.port, server.url
    beat = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "crawlproject", "beat", "-l", "INFO"],
        cwd=BASE_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        down_at = time.time()
        pages_recrawl_all(project_id=project.id)  # its next tick, now
        alert = Alert.objects.filter(project=project, monitor__kind=Monitor.Kind.SITE_DOWN, resolved_at=None)

        def waiting_long() -> bool:
            later = timezone.now() + timedelta(seconds=float(env["CRAWL_RETRY_LONG_SECONDS"]) / 2)
            pages = Page.objects.filter(project=project)
            return pages.filter(state="queued", next_fetch_at__gt=later).count() == pages.count() and alert.exists()

        wait_until(waiting_long, timeout=timeout, interval=0.5, what="its pages on their long retries, the alert open")
        time.sleep(max(0.0, down_at + down_for - time.time()))
        with SiteServer(site, port=port) as back:
            back_at = time.time()
            opened = alert.get()
            paths = {"/", *links}
            wait_until(lambda: paths <= set(back.paths()), timeout=timeout, interval=0.2, what="its pages asked again")
            asked = {path: min(t for t, p in back.log if p == path) - back_at for path in paths}
            wait_until(
                lambda: Alert.objects.get(id=opened.id).resolved_at, timeout=timeout, interval=0.2, what="recovery"
            )
            done = Page.objects.filter(project=project, state="done", fetched_at__gte=opened.since)
            wait_until(lambda: done.count() == 4, timeout=timeout, interval=0.2, what="its pages done again")
    finally:
        beat_stop(beat)
    resolved = Alert.objects.get(id=opened.id).resolved_at.timestamp() - back_at
    print(f"\n{url} down {back_at - down_at:.0f} s: asked again {max(asked.values()):.1f} s after its return, ", end="")
    print(f"alert recovered after {resolved:.1f} s")
    return {"asked": max(asked.values()), "resolved": resolved}


def test_a_monitored_site_that_comes_back_is_fetched_at_once_and_its_alert_recovers(workers, worker_env):
    """Compressed: the pages would wait ten minutes on their long retries; the host's probe (every
    second here) finds it back, its pages are due at once, and the alert recovers."""
    env = worker_env | {
        "CRAWL_RETRY_LONG_SECONDS": "600",
        "CRAWL_HOST_PROBE_SECONDS": "1",
        "CRAWL_REAP_INTERVAL_SECONDS": "1",
        "CONSOLE_MONITORS_TICK_SECONDS": "1",
    }
    seen = monitored_outage(workers, env, down_for=5, monitor={"minutes": 0.2, "min_failures": 3}, timeout=60)
    assert seen["asked"] < 10 and seen["resolved"] < 10


@pytest.mark.fault
@pytest.mark.timeout(1200)
def test_a_monitored_site_down_for_ten_minutes_is_fetched_within_a_minute_of_its_return(workers, worker_env):
    """The whole scenario at the shipped settings: ten minutes down; within 60 s of its return its
    pages are fetched again and the site-down alert recovers."""
    env = worker_env | {
        "CRAWL_RETRY_BASE_SECONDS": "30",
        "CRAWL_RETRY_LONG_SECONDS": "300",
        "CONSOLE_HEALTH_BUCKET_SECONDS": "60",
    }
    seen = monitored_outage(workers, env, down_for=600, monitor={}, timeout=700)
    assert seen["asked"] < 60 and seen["resolved"] < 60
