"""A spider logs into a loopback site's form once, and the pages behind it are crawled with the
session the site set, by separate fetch, render and extract workers, with rendering off and on
(Chromium gets the session and keeps the cookie it receives); the admin, in a browser, shows the
session masked."""

import shutil
from urllib.parse import parse_qs

import pytest
from django.contrib.auth import get_user_model

from bench.check import canon_path
from crawl.models import Page, SessionCookie
from crawl.services.projects import project_get_or_create
from scrape.models import Item
from tests.conftest import run_manage
from tests.console.test_admin_browser import PASSWORD as ADMIN_PASSWORD
from tests.console.test_admin_browser import chromium_page, log_in
from tests.login_spiders import PASSWORD, USER
from tests.servers import Site, SiteServer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed"),
]
HTML = {"Content-Type": "text/html; charset=utf-8"}
SID = "sid-7f3a9c"
LOGIN_FORM = b"""<html><body><form id="login" action="/session" method="post">
<input type="hidden" name="csrf" value="tok-42"><input name="user"><input name="password" type="password">
</form></body></html>"""
MEMBERS = b"""<html><body><a href="/members/a">a</a> <a href="/members/b">b</a><script>
const a = document.createElement("a"); a.href = "/members/c"; a.textContent = "c"; document.body.appendChild(a);
</script></body></html>"""
TO_LOGIN = (302, {**HTML, "Location": "/login"}, b"")


def logged_in(request) -> bool:
    cookie = next((v for k, v in request.headers.items() if k.lower() == "cookie"), "")
    return f"sid={SID}" in cookie.split("; ")


def session(request):
    form = {k: v[0] for k, v in parse_qs(request.body.decode()).items()}
    if request.method != "POST" or form != {"csrf": "tok-42", "user": USER, "password": PASSWORD}:
        return 403, HTML, b"bad login"
    cookie = f"sid={SID}; Path=/; HttpOnly; Max-Age=3600"
    return 303, {**HTML, "Location": "/members/", "Set-Cookie": cookie}, b""


def members_page(name: str):
    body = f'<html><body><p class="secret">secret of {name}</p></body></html>'.encode()
    return lambda request: (200, HTML, body) if logged_in(request) else TO_LOGIN


def login_site() -> Site:
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    site.files["/login"] = (200, HTML, LOGIN_FORM)
    site.files["/session"] = session
    site.files["/members/"] = lambda request: (200, HTML, MEMBERS) if logged_in(request) else TO_LOGIN
    for name in ("a", "b", "c"):
        site.files[f"/members/{name}"] = members_page(name)
    return site


@pytest.mark.parametrize("render", [False, True], ids=["plain", "rendered"])
def test_a_spider_logs_in_once_and_the_pages_behind_the_login_are_crawled_with_the_session(
    render, workers, worker_env, live_server
):
    env = worker_env | {"CRAWL_SPIDER_MODULES": "scrape.example_spiders,tests.login_spiders"}
    workers.env = env
    for stage in ("fetch", "extract", "download", "render"):
        workers.start(stage, stage, concurrency=1)
    project_get_or_create(name="members", allow_private=True, spider="login-test", render_js=render)
    with SiteServer(login_site()) as server:
        done = run_manage(
            ["crawl", f"{server.url}/login", "--workers", "0", "--project", "members", "--timeout", "150"], env
        )
        assert done.returncode == 0, done.stdout + done.stderr
        logins = [r for r in server.requests if r.path == "/session"]
        behind = [r for r in server.requests if r.path.startswith("/members/")]
    secrets = set(Item.objects.filter(project__slug="members", kind="spider").values_list("data__secret", flat=True))
    expected = {"secret of a", "secret of b"} | ({"secret of c"} if render else set())
    assert secrets == expected, "the pages behind the login, with the script's link only when rendered"
    assert len(logins) == 1 and all(logged_in(r) for r in behind)
    states = dict(Page.objects.filter(project__slug="members").values_list("url", "state"))
    assert {canon_path(u) for u, s in states.items() if s != "done"} == set()
    kept = SessionCookie.objects.get(project__slug="members")
    assert (kept.name, kept.value, kept.expires_at is not None) == ("sid", SID, True)
    project_id = kept.project_id
    get_user_model().objects.create_superuser("operator", "operator@example.com", ADMIN_PASSWORD)
    with chromium_page() as page:  # the admin, in a real browser: the session is there, masked
        log_in(page, live_server.url)
        page.goto(f"{live_server.url}/admin/crawl/project/{project_id}/change/")
        shown = page.locator(".field-session").inner_text()
        html = page.content()
    assert "sid=***" in shown and SID not in html
