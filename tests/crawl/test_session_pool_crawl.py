"""A site that lets each session cookie fetch 20 pages, then blocks it (403) or logs it out (a
redirect to the login page): a pool of 4 sessions, each logged in by the spider's login route,
crawls its 200 pages with real fetch and extract workers. Each spent session is retired and a
fresh login takes its place; every fetch names its session; the admin shows the sessions."""

import itertools
import threading
from collections import Counter
from urllib.parse import parse_qs

import pytest

from crawl.models import CookieSession, Page
from crawl.services.projects import project_get_or_create
from scrape.models import Item
from tests.conftest import run_manage
from tests.login_spiders import PASSWORD, USER
from tests.servers import Site, SiteServer

pytestmark = pytest.mark.integration
HTML = {"Content-Type": "text/html; charset=utf-8"}
PAGES, USES_PER_SESSION, POOL = 200, 20, 4
LOGIN_FORM = b"""<html><body><form id="login" action="/session" method="post">
<input type="hidden" name="csrf" value="tok-42"><input name="user"><input name="password" type="password">
</form></body></html>"""
TO_LOGIN = (302, {**HTML, "Location": "/login"}, b"")
BLOCKED = (403, HTML, b"<html><body>too many requests for this session</body></html>")


class LimitedSessions:
    """The site's side: a new sid per login; each sid fetches USES_PER_SESSION member pages, then
    an even sid is blocked (403) and an odd one sent back to the login page."""

    def __init__(self):
        self.numbers, self.used, self.lock = itertools.count(1), Counter(), threading.Lock()
        self.refused: Counter = Counter()  # sid -> member requests refused

    def login(self, request):
        form = {k: v[0] for k, v in parse_qs(request.body.decode()).items()}
        if request.method != "POST" or form != {"csrf": "tok-42", "user": USER, "password": PASSWORD}:
            return 403, HTML, b"bad login"
        sid = f"sid-{next(self.numbers)}"
        return 303, {**HTML, "Location": "/members/", "Set-Cookie": f"sid={sid}; Path=/; HttpOnly"}, b""

    def members(self, body: bytes):
        def answer(request):
            cookie = next((v for k, v in request.headers.items() if k.lower() == "cookie"), "")
            sid = next((c[4:] for c in cookie.split("; ") if c.startswith("sid=")), "")
            with self.lock:
                self.used[sid] += 1
                spent = not sid or self.used[sid] > USES_PER_SESSION
                self.refused[sid] += spent
            if not spent:
                return 200, HTML, body
            return BLOCKED if int(sid.rpartition("-")[2] or 1) % 2 == 0 else TO_LOGIN

        return answer


def limited_site(sessions: LimitedSessions) -> Site:
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    site.files["/login"] = (200, HTML, LOGIN_FORM)
    site.files["/session"] = sessions.login
    links = "".join(f'<a href="/members/p{i}">{i}</a> ' for i in range(PAGES - 1))
    site.files["/members/"] = sessions.members(f"<html><body>{links}</body></html>".encode())
    for i in range(PAGES - 1):
        body = f'<html><body><p class="secret">secret {i}</p></body></html>'.encode()
        site.files[f"/members/p{i}"] = sessions.members(body)
    return site


def test_a_pool_of_four_sessions_crawls_a_site_that_spends_each_session_after_twenty_pages(
    workers, worker_env, admin_client
):
    env = worker_env | {"CRAWL_SPIDER_MODULES": "scrape.example_spiders,tests.login_spiders"}
    workers.env = env
    for stage in ("fetch", "extract", "download"):
        workers.start(stage, stage, concurrency=1)
    sessions = LimitedSessions()
    with SiteServer(limited_site(sessions)) as server:
        project = project_get_or_create(
            name="members",
            allow_private=True,
            spider="login-test",
            session_pool_size=POOL,
            session_login_url=f"{server.url}/login",
            session_retire_statuses="403",
        )
        done = run_manage(
            ["crawl", f"{server.url}/members/", "--workers", "0", "--project", "members", "--timeout", "150"], env
        )
        assert done.returncode == 0, done.stdout + done.stderr
        logins = [r for r in server.requests if r.path == "/session"]
    members = Page.objects.filter(project=project, url__contains="/members/")
    assert members.count() == PAGES and set(members.values_list("state", flat=True)) == {"done"}
    secrets = Item.objects.filter(project=project, kind="spider").values_list("data__secret", flat=True)
    assert set(secrets) == {f"secret {i}" for i in range(PAGES - 1)}
    assert not members.filter(cookie_session__isnull=True).exists(), "every fetch names its session"
    pool = CookieSession.objects.filter(project=project)
    reasons = Counter(r.split(":")[0] for r in pool.filter(state="retired").values_list("retired_reason", flat=True))
    # 200 member answers at 20 a session: at least 10 logins; every spent session was retired
    # (blocked or logged out) and replaced, so the pool still holds 4 live ones at the end.
    assert len(logins) >= PAGES // USES_PER_SESSION, len(logins)
    assert reasons["blocked"] + reasons["expired"] >= len(logins) - POOL, reasons
    assert reasons["blocked"] >= 3 and reasons["expired"] >= 3, reasons
    assert pool.filter(slot__isnull=False).count() == POOL
    admin = admin_client.get(f"/admin/crawl/project/{project.id}/change/").content.decode()
    table = admin[admin.index('<table class="cookie-sessions">') :].split("</table>")[0]
    assert table.count("<tr>") >= len(logins) + 1 and "retired" in table and "blocked: http 403" in table
    assert "sid=***" in admin and "sid-" not in admin, "the cookie values are masked"
    refused, most = sum(sessions.refused.values()), max(sessions.used.values())
    print(f"logins={len(logins)} sessions={pool.count()} retired={dict(reasons)} refused={refused} most={most}")
