"""The console's Content-Security-Policy: every page carries one that runs no inline script, and no
page needs an inline script; a view's own stricter policy (a stored body's sandbox) is kept."""

import re
import zlib

import pytest

from console.middleware import CONSOLE_CSP
from core.canonical import url_key
from crawl.models import Page, PageContent, Project

pytestmark = pytest.mark.django_db
# A <script> element a browser would run: no src, and no data type such as application/json.
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/(?:ld\+)?json\")[^>]*>", re.I)
PAGES = [
    "/admin/",
    "/admin/dashboard/",
    "/admin/crawl/project/",
    "/admin/crawl/project/add/",
    "/admin/crawl/page/",
    "/admin/tryurl/",
    "/admin/debugger/",
    "/admin/scrape/ruleset/add/",
    "/api/docs/",
    "/api/projects/",
]


@pytest.mark.parametrize("path", PAGES)
def test_every_console_page_has_a_policy_that_runs_no_inline_script(admin_client, path):
    Project.objects.get_or_create(name="csp", slug="csp")
    response = admin_client.get(path, headers={"Accept": "text/html"})
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == CONSOLE_CSP and "script-src 'self'" in CONSOLE_CSP
    assert "unsafe-inline" not in CONSOLE_CSP.split("script-src")[1].split(";")[0]
    assert INLINE_SCRIPT.findall(response.content.decode()) == []


def test_the_api_docs_script_is_served_from_the_console_itself(admin_client):
    html = admin_client.get("/api/docs/").content.decode()
    sources = re.findall(r'<script src="([^"]+)"', html)
    assert sources and all(src.startswith("/") for src in sources)
    assert admin_client.get(sources[-1]).status_code == 200


def test_a_stored_body_keeps_its_own_sandbox_policy(admin_client):
    project = Project.objects.create(name="body", slug="body")
    url = "http://a.test/"
    page = Page.objects.create(project=project, url=url, url_key=url_key(url), host="a.test", state="done")
    PageContent.objects.create(page=page, headers={}, body=zlib.compress(b"<script>x</script>"))
    response = admin_client.get(f"/admin/crawl/page/{page.id}/body/")
    assert response.status_code == 200 and "sandbox" in response["Content-Security-Policy"]
