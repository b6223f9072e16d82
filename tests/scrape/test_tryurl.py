"""Try-a-URL tells the truth: the crawl's request (a seed's POST), its rendering, and every link's
fate as discovery and the fetch stage decide it, on a loopback site and the real database."""

import json
import re
import shutil
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils.html import escape

from console.tryurl import trial_report, try_url
from core.canonical import Scope, canonicalize, server_of, url_key
from crawl.frontier.discovery import pages_discover
from crawl.models import Page, Project, Seed
from tests.servers import Site, SiteServer

HTML = "text/html; charset=utf-8"
LONG = "/" + "a" * 2100
START = (
    "<html><head><title>Start</title></head><body>"
    '<a href="http://127.0.0.2:{port}/elsewhere">elsewhere</a>'
    '<a href="/private/secret">secret</a>'
    '<a href="/sponsored" rel="nofollow sponsored">ad</a>'
    '<a href="/logout?x=1">log out</a>'
    '<a href="/known">known</a>'
    '<a href="/plain">plain</a>'
    f'<a href="{LONG}">long</a>'
    '<a href="/pic.jpg">picture</a>'
    "</body></html>"
)
SCRIPTED = (
    "<html><body><p>static</p><script>"
    'const a = document.createElement("a"); a.href = "/js-a.html"; a.textContent = "js";'
    "document.body.appendChild(a);</script></body></html>"
)
EXPECTED = {  # path -> (fate, a part of its reason)
    "/elsewhere": ("out of scope", "host 127.0.0.2 is not in the domains 127.0.0.1"),
    "/private/secret": ("robots.txt", "robots_disallowed: robots.txt disallows this URL"),
    "/sponsored": ("nofollow", "rel=nofollow or the page's meta robots"),
    "/logout?x=1": ("denied by pattern", "matches deny pattern /logout"),
    "/known": ("already known", "frontier has this URL"),
    "/plain": ("follow", ""),
    LONG: ("invalid URL", "url_too_long: URL longer than 2000 characters"),
    "/pic.jpg": ("media file", "downloaded as media, not crawled"),
}


@pytest.fixture
def site():
    pages = {
        "/robots.txt": ("text/plain", "User-agent: *\nDisallow: /private/\n"),
        "/start": (HTML, START),
        "/api": (HTML, '<html><body><a href="/api?page=2">next</a></body></html>'),
        "/scripted": (HTML, SCRIPTED),
    }
    with SiteServer(Site(default=(404, {"Content-Type": "text/plain"}, b"")), keep_alive=False) as server:
        files = {
            path: (200, {"Content-Type": kind}, text.format(port=server.port).encode())
            for path, (kind, text) in pages.items()
        }
        server.site.files = files
        yield server


def truth_project(server, **settings) -> Project:
    project = Project.objects.create(
        name="truth", slug="truth", allow_private=True, deny_patterns="/logout", **settings
    )
    Seed.objects.create(project=project, url=f"{server.url}/start")
    known = canonicalize(f"{server.url}/known")
    Page.objects.create(project=project, url=known, url_key=url_key(known), host=server_of(known), depth=1)
    return project


def fates_by_path(report: dict, server) -> dict:
    def path(url):
        return url.replace(server.url, "").replace(server.url.replace("127.0.0.1", "127.0.0.2"), "")

    return {path(f["url"]): (f["fate"], f["reason"]) for f in report["link_fates"]}


def test_it_gives_every_link_the_fate_the_crawl_gives_it(db, site):
    project = truth_project(site)
    report = trial_report(try_url(f"{site.url}/start", project=project))
    fates = fates_by_path(report, site)
    assert set(fates) == set(EXPECTED)
    for path, (fate, reason) in EXPECTED.items():
        assert fates[path][0] == fate, path
        assert reason in fates[path][1], (path, fates[path][1])
    assert report["links"] == [f"{site.url}/plain"]
    assert report["link_counts"]["follow"] == 1 and sum(report["link_counts"].values()) == len(EXPECTED)
    assert report["fetch"] == {"method": "GET", "body_bytes": 0, "rendered": False, "request_from": "seed"} | {
        "depth": 0,
        "kind": "page",
    }
    assert Page.objects.count() == 1, "the trial writes no rows"


def test_the_links_it_follows_are_the_rows_discovery_inserts(db, site):
    project = truth_project(site)
    trial = try_url(f"{site.url}/start", project=project)
    inserted_by_trial = {f.url for f in trial.links if f.fate in ("follow", "robots.txt")}
    pages_discover(project=project, links=trial.result.links)
    new_rows = set(Page.objects.filter(project=project).exclude(url__endswith="/known").values_list("url", flat=True))
    assert new_rows == {canonicalize(url) for url in inserted_by_trial}


def test_the_command_prints_every_link_under_its_fate_with_the_reason(db, site):
    truth_project(site)
    out = StringIO()
    call_command("tryurl", f"{site.url}/start", "--project", "truth", stdout=out)
    text = out.getvalue()
    assert "[links to follow: 1 of 8]" in text
    assert "fetch    GET, the request of its seed; depth 0, page" in text
    for fate in {fate for fate, _ in EXPECTED.values()}:
        count = sum(1 for f, _ in EXPECTED.values() if f == fate)
        assert f"\n  {fate} ({count})\n" in text, fate
    section = text.split("  out of scope (1)\n", 1)[1]
    assert section.startswith("    http://127.0.0.2:"), "the link is listed under its fate"
    for path, (_, reason) in EXPECTED.items():
        assert reason in text, path


def test_the_admin_page_shows_a_table_of_links_grouped_by_fate(admin_client, site):
    project = truth_project(site)
    response = admin_client.post("/admin/tryurl/", {"url": f"{site.url}/start", "project": project.id})
    html = response.content.decode()
    assert response.status_code == 200
    assert "Links to follow: 1 of 8" in html
    table = html.split('<table class="link-fates">', 1)[1].split("</table>", 1)[0]
    groups = re.findall(r'<tbody class="fate-([a-z-]+)">\s*<tr><th colspan="2" scope="rowgroup">([^<]+)</th>', table)
    assert [label for _, label in groups][:1] == ["follow (1)"], "followed links first"
    assert {slug for slug, _ in groups} == {
        "follow",
        "robotstxt",
        "already-known",
        "out-of-scope",
        "denied-by-pattern",
        "invalid-url",
        "nofollow",
        "media-file",
    }
    for path, (_, reason) in EXPECTED.items():
        url = f"http://127.0.0.2:{site.port}{path}" if path == "/elsewhere" else f"{site.url}{path}"
        assert f"<tr><td>{escape(url)}</td><td>" in table and escape(reason) in table, path


@pytest.mark.parametrize(
    ("settings", "fate", "reason", "count"),
    [
        ({"max_depth": 0}, "depth", "depth 1 is beyond max_depth 0", 5),
        ({"max_pages": 1}, "page budget", "max_pages (1) reached", 2),
        ({"max_pages_per_host": 2}, "page budget", "max_pages_per_host (2) reached for 127.0.0.1:{port}", 1),
    ],
)
def test_it_says_when_depth_or_a_page_budget_stops_a_link(db, site, settings, fate, reason, count):
    project = truth_project(site, **settings)
    trial = try_url(f"{site.url}/start", project=project)
    stopped = [f for f in trial.links if f.fate == fate]
    assert len(stopped) == count and {f.reason for f in stopped} == {reason.format(port=site.port)}
    pages_discover(project=project, links=trial.result.links)
    followed = {canonicalize(f.url) for f in trial.links if f.fate in ("follow", "robots.txt")}
    assert set(Page.objects.exclude(url__endswith="/known").values_list("url", flat=True)) == followed


def test_a_post_seed_is_tried_with_its_method_body_and_headers(db, site):
    project = Project.objects.create(name="api", slug="api", allow_private=True)
    body = json.dumps({"q": "lamps"})
    Seed.objects.create(project=project, url=f"{site.url}/api", method="POST", body=body, headers={"X-Api": "1"})
    report = trial_report(try_url(f"{site.url}/api", project=project))
    assert ("POST", "/api", body.encode()) in [(r.method, r.path, r.body) for r in site.requests]
    assert report["fetch"]["method"] == "POST" and report["fetch"]["body_bytes"] == len(body)
    assert report["fetch"]["request_from"] == "seed"
    assert report["links"] == [f"{site.url}/api?page=2"]


def test_a_frontier_rows_request_and_depth_are_what_the_crawl_sends(db, site):
    project = Project.objects.create(name="rowreq", slug="rowreq", allow_private=True, max_depth=1)
    url = canonicalize(f"{site.url}/api")
    Page.objects.create(
        project=project,
        url=url,
        url_key=url_key(url),
        host="127.0.0.1",
        depth=1,
        request={"method": "POST", "body": "x"},
    )
    report = trial_report(try_url(url, project=project))
    assert ("POST", "/api", b"x") in [(r.method, r.path, r.body) for r in site.requests]
    assert report["fetch"]["request_from"] == "frontier row" and report["fetch"]["depth"] == 1
    assert [f["fate"] for f in report["link_fates"]] == ["depth"]


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (run scripts/system-deps.sh)")
def test_a_render_js_projects_trial_sees_script_built_links(db, site):
    plain = Project.objects.create(name="plain", slug="plain", allow_private=True)
    rendered = Project.objects.create(name="rendered", slug="rendered", allow_private=True, render_js=True)
    assert trial_report(try_url(f"{site.url}/scripted", project=plain))["links"] == []
    report = trial_report(try_url(f"{site.url}/scripted", project=rendered))
    assert report["error"] == "" and report["fetch"]["rendered"] is True
    assert report["links"] == [f"{site.url}/js-a.html"]


@pytest.mark.parametrize(
    ("url", "depth", "code", "message"),
    [
        ("http://a.test/x", 3, "depth", "depth 3 is beyond max_depth 2"),
        ("http://b.test/x", 0, "offsite", "host b.test is not in the domains a.test"),
        ("http://a.test/logout", 0, "denied", "matches deny pattern /log(out|in)"),
        ("http://a.test/other", 0, "not_allowed", "matches none of the allow patterns /x, /logout"),
    ],
)
def test_a_scope_refusal_names_the_limit_behind_rejects(url, depth, code, message):
    scope = Scope.build(domains=["a.test"], max_depth=2, allow=["/x", "/logout"], deny=["/log(out|in)"])
    assert scope.rejects(url, depth) == code
    assert scope.refusal(url, depth) == (code, message)


def test_an_in_scope_url_has_no_refusal():
    scope = Scope.build(domains=["a.test"], max_depth=2, allow=["/x"], deny=["/logout"])
    assert scope.rejects("http://www.a.test/x", 2) is None and scope.refusal("http://www.a.test/x", 2) is None


def test_it_says_whether_robots_txt_rules_allowed_the_page_or_there_were_none(db, site):
    project = truth_project(site)
    assert trial_report(try_url(f"{site.url}/start", project=project))["robots"] == "allowed by its rules"
    with SiteServer(Site(files={"/": (200, {"Content-Type": "text/html"}, b"<p>hi</p>")})) as bare:
        report = trial_report(try_url(f"{bare.url}/", allow_private=True))
    assert report["robots"].startswith("allowed: the site has no robots.txt (it answered 4xx)")


@pytest.mark.django_db
def test_the_cookies_the_site_sets_are_shown_masked_as_the_project_page_shows_its_session(site):
    """Issue 47, point 5: Try a URL shows Set-Cookie with its values masked, its attributes kept."""
    site.site.files["/login"] = (200, {"Content-Type": HTML, "Set-Cookie": "sid=cookie-s3cret; Path=/"}, b"<p>in</p>")
    report = trial_report(try_url(f"{site.url}/login", allow_private=True))
    assert report["status"] == 200 and report["headers"]["set-cookie"] == "sid=***; Path=/"
    out = StringIO()
    call_command("tryurl", f"{site.url}/login", "--allow-private", "--json", stdout=out)
    assert "sid=***" in out.getvalue() and "cookie-s3cret" not in out.getvalue()
