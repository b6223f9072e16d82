"""Block detection across real workers: a site that answers a captcha page with 200 once a session
has made its 20 requests. The server's own log says which answers were real."""

import threading
import time
from collections import Counter

import pytest

from console.dashboard import dashboard_snapshot
from console.health.counters import health_chart, health_figures
from console.health.models import Alert, Monitor
from console.health.monitors import monitors_tick
from crawl.models import HostBlock, Page
from scrape.models import Item
from tests.conftest import last_json_line, run_manage
from tests.servers import Request, Site, SiteServer

pytestmark = pytest.mark.integration
HTML = {"Content-Type": "text/html; charset=utf-8"}
PAGES = 30
FIRST = 24
CAPTCHA = (
    b"<html><head><title>Are you a robot?</title></head><body><h1>CAPTCHA-WALL</h1>"
    b'<form action="/captcha-check"><div class="g-recaptcha"></div></form><a href="/captcha-trap">help</a>'
    b"</body></html>"
)


class SessionLimit:
    """Answers `limit` requests per session cookie, then the captcha page (status 200) until
    `cooldown` seconds after its first one; a request without the cookie starts a session."""

    def __init__(self, limit: int = 20, cooldown: float = 1.0):
        self.limit, self.cooldown = limit, cooldown
        self.sessions: dict[str, tuple[int, float | None]] = {}  # sid -> (requests, blocked since)
        self.real, self.captchas = Counter(), Counter()
        self._lock = threading.Lock()

    def __call__(self, request: Request) -> tuple:
        path = request.path.split("?")[0]
        if path == "/robots.txt":
            return (404, HTML, b"")
        with self._lock:
            sid, headers = self._session(request)
            used, since = self.sessions[sid]
            if since is not None and time.time() - since > self.cooldown:
                used, since = 0, None
            blocked = used >= self.limit
            self.sessions[sid] = (used + 1, (since or time.time()) if blocked else None)
            (self.captchas if blocked else self.real)[path] += 1
        return (200, HTML | headers, CAPTCHA if blocked else real_page(path))

    def _session(self, request: Request) -> tuple[str, dict]:
        cookie = request.headers.get("Cookie", "")
        sid = next((c.split("=", 1)[1] for c in cookie.split("; ") if c.startswith("sid=")), None)
        if sid in self.sessions:
            return sid, {}
        sid = f"s{len(self.sessions) + 1}"
        self.sessions[sid] = (0, None)
        return sid, {"Set-Cookie": f"sid={sid}; Path=/"}


def real_page(path: str) -> bytes:
    """ "/" links pages 1 to FIRST (one round of the crawl: more than the session's limit), and
    pages 1 to 5 one page after them each, found by parsing them."""
    i = 0 if path == "/" else int(path.removeprefix("/p/"))
    targets = range(1, FIRST + 1) if i == 0 else [FIRST + i] if i <= PAGES - 1 - FIRST else []
    links = "".join(f'<a href="/p/{k}">page {k}</a>' for k in targets)
    return f"<html><head><title>Page {i}</title></head><body><p>Real page {i}.</p>{links}</body></html>".encode()


def test_a_captcha_answered_with_200_is_retried_until_every_real_page_is_fetched(workers, worker_env):
    limit = SessionLimit()
    with SiteServer(Site(default=limit)) as server:
        workers.env = worker_env
        workers.start("fetch", "fetch")
        workers.start("extract", "extract")
        command = ["crawl", f"{server.url}/", "--allow-private", "--workers", "0", "--json", "--timeout", "120"]
        done = run_manage([*command, "--project", "walled"], worker_env)
        assert done.returncode == 0, done.stdout + done.stderr
        summary = last_json_line(done.stdout)
    real_paths = {"/"} | {f"/p/{k}" for k in range(1, PAGES)}
    print(f"\n{sum(limit.real.values())} real answers, {sum(limit.captchas.values())} captchas: {summary}")
    assert sum(limit.captchas.values()) >= 3, "the site never blocked: the test proves nothing"
    assert set(limit.real) == real_paths and set(limit.real.values()) == {1}, "every real page once"
    pages = Page.objects.filter(project__slug="walled")
    assert pages.count() == PAGES and set(pages.values_list("state", flat=True)) == {"done"}
    assert "/captcha-trap" not in limit.captchas | limit.real, "a captcha page's links are not followed"
    items = list(Item.objects.filter(project__slug="walled").values_list("data", flat=True))
    assert items and not [data for data in items if "CAPTCHA" in str(data) or "robot" in str(data)]

    project = pages.first().project
    evidence = HostBlock.objects.get(project=project)
    assert evidence.rule == "block title" and "CAPTCHA-WALL" in evidence.sample
    figures = health_figures(project.id)
    assert figures["blocked"] == sum(limit.captchas.values()) and figures["errors_by_code"]["blocked"] > 0
    assert figures["fetch_success_rate"] < 1

    monitors_tick()
    alert = Alert.objects.get(project=project, monitor__kind=Monitor.Kind.HOST_BLOCKED, resolved_at=None)
    assert alert.evidence["rule"] == "block title" and "CAPTCHA-WALL" in alert.evidence["sample"]
    assert 'data-monitor="host_blocked"' in health_chart(project.id)
    shown = dashboard_snapshot(project)
    assert [(b["host"], b["blocked"]) for b in shown["blocked"]] == [(evidence.host, figures["blocked"])]
    assert sum(minute["failed"] for minute in shown["throughput"]) >= figures["blocked"]
