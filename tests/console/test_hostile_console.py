"""A hostile site crawled, then every console view of it loaded in a real browser (Debian's chromium
through Playwright): markup from titles, descriptions, headings, link text, JSON-LD that tries to
close its <script>, OpenGraph, headers, redirects, URLs, error messages and items is shown as text.
No script of the site's runs (no dialog opens, no marker is set), and the console's own pages break
no rule of their Content-Security-Policy."""

import shutil

import pytest
from django.contrib.auth import get_user_model

from crawl.models import Page, Project
from crawl.services.projects import seeds_add
from fetch.services import pages_fetch
from scrape.models import Item, RuleSet
from scrape.services import pages_extract
from tests.console.test_admin_browser import chromium_page
from tests.servers import Site, SiteServer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (scripts/system-deps.sh)"),
]
PASSWORD = "correct-horse-battery-staple"
# Each payload, if it ever ran, opens a dialog or sets window.__pwned.
PAYLOAD = (
    "<script>window.__pwned=1;alert('script')</script><img src=x onerror=\"window.__pwned=1;alert('img')\">"
    "\"'><svg onload=alert('svg')>"
)
HTML = {"Content-Type": "text/html; charset=utf-8"}
# Records violations of the page's policy: a console page that needs an inline script would show here.
WATCH = """
window.__violations = [];
document.addEventListener('securitypolicyviolation',
  e => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));
"""


def hostile_site() -> Site:
    ld = '{"@type": "Thing", "name": "</script><script>window.__pwned=1;alert(\'ld\')</script>"}'
    home = f"""<html><head><title>{PAYLOAD}</title>
      <meta name="description" content="{PAYLOAD.replace('"', "&quot;")}">
      <meta property="og:title" content="{PAYLOAD.replace('"', "&quot;")}">
      <script type="application/ld+json">{ld}</script></head>
      <body><h1>{PAYLOAD}</h1><h2>{PAYLOAD}</h2>
      <a href="/next?q=%3Cscript%3Ealert(1)%3C/script%3E">{PAYLOAD}</a>
      <a href="javascript:alert('href')">{PAYLOAD}</a>
      <a href="/moved">moved</a> <a href="/broken">broken</a>
      <ul><li class="p"><b>{PAYLOAD}</b></li></ul></body></html>"""
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    site.files["/"] = (200, HTML | {"X-Evil": "<script>alert('header')</script>"}, home.encode())
    site.files["/next"] = (200, HTML, f"<html><head><title>{PAYLOAD}</title></head><body>x</body></html>".encode())
    site.files["/moved"] = (302, {"Location": "/next?<script>alert('redirect')</script>"}, b"")
    site.files["/broken"] = (500, HTML, PAYLOAD.encode())
    # Not linked: the controls that show the payload runs, and the watcher sees a blocked script.
    site.files["/control"] = (200, HTML, home.encode())
    site.files["/csp-control"] = (200, HTML | {"Content-Security-Policy": "script-src 'self'"}, home.encode())
    return site


def crawl(server: SiteServer) -> Project:
    project = Project.objects.create(
        name=f"x{PAYLOAD[:60]}", slug="hostile", allow_private=True, obey_robots=False, max_depth=2
    )
    spec = {"name": "p", "item_selector": "li.p", "fields": {"name": {"css": "b"}}}
    RuleSet.objects.create(project=project, name=f"r{PAYLOAD[:60]}", spec=spec)
    seeds_add(project=project, urls=[f"{server.url}/"])
    for _ in range(4):
        queued = list(Page.objects.filter(project=project, state="queued").values_list("id", flat=True))
        pages_extract(page_ids=pages_fetch(page_ids=queued))
    return project


def console_views(project: Project) -> list[str]:
    pages = [
        f"/admin/crawl/page/{i}/change/" for i in Page.objects.filter(project=project).values_list("id", flat=True)
    ]
    items = [
        f"/admin/scrape/item/{i}/change/" for i in Item.objects.filter(project=project).values_list("id", flat=True)
    ]
    return [
        "/admin/",
        "/admin/dashboard/",
        f"/admin/dashboard/?project={project.id}",
        "/admin/crawl/project/",
        f"/admin/crawl/project/{project.id}/change/",
        "/admin/crawl/page/",
        "/admin/crawl/failedpage/",
        "/admin/scrape/item/",
        "/admin/scrape/ruleset/",
        "/admin/crawl/host/",
        "/admin/console/job/",
        "/api/pages/",
        "/api/items/",
        "/api/docs/",
        *pages,
        *items,
    ]


def test_no_script_of_a_hostile_site_runs_in_any_console_view(live_server, transactional_db):
    get_user_model().objects.create_superuser("admin", "admin@example.com", PASSWORD)
    with SiteServer(hostile_site()) as server:
        project = crawl(server)
        views = console_views(project)
        assert Item.objects.filter(project=project, kind="rule:p").exists(), "the items were extracted"
        assert Page.objects.filter(project=project, status_code=500).exists()
        try_url = f"{server.url}/"
        dialogs, marked, violations, failed = [], [], [], []
        with chromium_page() as page:
            page.add_init_script(WATCH)
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(f"{server.url}/control")
            assert page.evaluate("window.__pwned") == 1 and dialogs, "the payloads run on a page that lets them"
            page.goto(f"{server.url}/csp-control")
            assert page.evaluate("window.__violations"), "the watcher sees what a policy blocks"
            dialogs.clear()
            page.goto(f"{live_server.url}/admin/login/")
            page.fill("#id_username", "admin")
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            for view in views:
                failed += [view] if page.goto(live_server.url + view).status >= 400 else []
                page.wait_for_load_state("load")
                marked += [view] if page.evaluate("window.__pwned") else []
                violations += [(view, v) for v in page.evaluate("window.__violations")]
            page.goto(f"{live_server.url}/admin/tryurl/")
            page.fill("#id_url", try_url)
            page.select_option("#id_project", str(project.id))
            page.click("input[type=submit]")
            page.wait_for_load_state("load")
            assert page.locator("text=Items").count() > 0, "the trial ran"
            marked += ["tryurl"] if page.evaluate("window.__pwned") else []
            violations += [("tryurl", v) for v in page.evaluate("window.__violations")]
    assert len(views) > 20 and failed == [], failed
    assert dialogs == [] and marked == [], (dialogs, marked)
    assert violations == [], violations
