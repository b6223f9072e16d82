"""A render_js project's pages reach Chromium with what the user configured: the project's cookies
and request headers, a seed's or spider's method, body, headers and cookies, the conditional-GET
validators, and the project's session; the cookies Chromium receives join the session."""

import hashlib
import shutil

import pytest

from core.canonical import server_of, url_key
from crawl.models import CookieSession, Page, Project, SessionCookie
from fetch.services import pages_fetch
from tests.servers import Site, SiteServer

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed"),
]
HTML = {"Content-Type": "text/html; charset=utf-8"}
UNCHANGED = b"<html><body>the same as before</body></html>"


def header(request, name: str) -> str:
    return next((v for k, v in request.headers.items() if k.lower() == name.lower()), "")


def queued(project: Project, url: str, **fields) -> Page:
    return Page.objects.create(project=project, url=url, url_key=url_key(url), host=server_of(url), **fields)


def test_a_rendered_page_is_requested_as_configured_and_keeps_the_cookies_chromium_receives():
    site = Site(etags=True)
    site.files["/search"] = (200, {**HTML, "Set-Cookie": "seen=1; Path=/"}, b"<html><body>results</body></html>")
    site.files["/same"] = (200, HTML, UNCHANGED)
    with SiteServer(site) as server:
        project = Project.objects.create(
            name="r",
            slug="r",
            render_js=True,
            allow_private=True,
            obey_robots=False,
            cookies={"session": "abc"},
            request_headers={"Accept-Language": "fr"},
            allowed_domains="127.0.0.1",
        )
        owner = CookieSession.objects.create(project=project, slot=0)  # the first session of its pool
        SessionCookie.objects.create(
            project=project, cookie_session=owner, domain="127.0.0.1", path="/", name="sid", value="logged-in"
        )
        own = {
            "method": "POST",
            "body": "q=lamps",
            "headers": {"X-Seed": "s", "Content-Type": "application/x-www-form-urlencoded"},
            "cookies": {"pref": "dark"},
        }
        search = queued(project, f"{server.url}/search", request=own)
        tag = '"' + hashlib.sha256(UNCHANGED).hexdigest()[:16] + '"'
        same = queued(project, f"{server.url}/same", etag=tag, content_sha256="x", fetch_count=1)
        pages_fetch(page_ids=[search.id, same.id], render=True)
        sent = {r.path: r for r in server.requests}
    post = sent["/search"]
    assert (post.method, post.body, header(post, "X-Seed"), header(post, "Accept-Language")) == (
        "POST",
        b"q=lamps",
        "s",
        "fr",
    )
    assert sorted(header(post, "Cookie").split("; ")) == ["pref=dark", "session=abc", "sid=logged-in"]
    assert header(sent["/same"], "If-None-Match") == tag
    search.refresh_from_db()
    same.refresh_from_db()
    assert search.state == "fetched" and search.status_code == 200
    assert same.state == "done" and same.not_modified_at is not None  # 304: the stored copy stands
    assert set(SessionCookie.objects.values_list("name", "value")) == {("sid", "logged-in"), ("seen", "1")}
