"""The admin's Try-a-URL report, a page's detail and stored body, and the version diff, on the real
database and a loopback site."""

import hashlib
import re
import zlib
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone
from django.utils.html import escape

from console.models import ProjectAccess
from crawl.models import MediaAsset, Page, PageAsset, PageContent, PageVersion, Project
from scrape.models import Item, RuleSet
from tests.helpers import free_port
from tests.servers import Site, SiteServer

HTML = {"Content-Type": "text/html; charset=utf-8"}
SHOP = (
    b"<html><head><title>Shop</title></head><body><ul>"
    b'<li class="p"><b>Lamp</b> <i>red</i><i>blue</i></li>'
    b'<li class="p"><b>Chair</b> <i>oak</i></li>'
    b'<li class="p"><i>nameless</i></li>'
    b"</ul></body></html>"
)
PRODUCTS = {
    "name": "product",
    "item_selector": "li.p",
    "fields": {"name": {"css": "b"}, "colours": {"css": "i", "many": True}},
    "required": ["name"],
}


@pytest.fixture
def shop():
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    site.files["/shop"] = (200, HTML, SHOP)
    with SiteServer(site) as server:
        yield server


@pytest.fixture
def project(make_project):
    return make_project(name="polish", allow_private=True)


def add_page(project, url: str, **fields) -> Page:
    key = hashlib.sha256(url.encode()).hexdigest()
    return Page.objects.create(project=project, url=url, url_key=key, host=url.split("/")[2], **fields)


def try_url(client, url: str, **fields) -> str:
    response = client.post("/admin/tryurl/", {"url": url, "allow_private": "on", **fields})
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize(
    ("url", "private", "error"),
    [
        ("ftp://example.com/file", "on", "blocked_scheme"),
        ("http://127.0.0.1:9/", "", "blocked_address"),
        ("http://127.0.0.1:{port}/", "on", "connect"),
    ],
)
def test_it_shows_a_failed_trial_as_an_error_without_empty_sections(admin_client, url, private, error):
    response = admin_client.post("/admin/tryurl/", {"url": url.format(port=free_port()), "allow_private": private})
    html = response.content.decode()
    assert response.status_code == 200
    assert '<p class="errornote">The trial failed: ' in html
    assert error in html.split('class="errornote">', 1)[1].split("</p>")[0]
    assert "Items (" not in html and "Links to follow" not in html
    assert "<li></li>" not in html.replace(" ", "")


def test_it_renders_items_as_tables_with_their_errors(admin_client, project, shop):
    RuleSet.objects.create(project=project, name="product", spec=PRODUCTS)
    html = try_url(admin_client, f"{shop.url}/shop", project=project.id)
    assert "Items (4)" in html, "the page item and three products"
    assert html.count('<table class="item-table">') >= 4
    assert "<caption>rule:product #0</caption>" in html
    assert '<th scope="row">name</th><td>Lamp</td>' in html
    assert '<th scope="row">colours</th><td><code>[&quot;red&quot;, &quot;blue&quot;]</code></td>' in html
    assert '<ul class="errorlist item-errors"><li>missing required field name</li></ul>' in html
    assert "{&#x27;" not in html and "[&#x27;" not in html, "no Python reprs"
    assert Page.objects.count() == Item.objects.count() == 0


@pytest.mark.parametrize(("kind", "selector"), [("css", "li.p i"), ("xpath", "//li[@class='p']/i")])
def test_it_shows_what_a_selector_finds_on_the_fetched_page(admin_client, shop, kind, selector):
    html = try_url(admin_client, f"{shop.url}/shop", selector=selector, selector_type=kind)
    assert "4 matches." in html
    found = html.split('<ol class="selector-matches">', 1)[1].split("</ol>")[0]
    assert [part.split("</li>")[0] for part in found.split("<li>")[1:]] == ["red", "blue", "oak", "nameless"]


def test_an_xpath_that_gives_a_number_is_one_match(admin_client, shop):
    html = try_url(admin_client, f"{shop.url}/shop", selector="count(//li)", selector_type="xpath")
    assert "1 match." in html and "<li>3</li>" in html


@pytest.mark.parametrize(
    ("kind", "selector", "reason"),
    [
        ("css", "li[[", "invalid CSS selector"),
        ("xpath", "//li[@", "invalid XPath"),
        ("xpath", "$nope", "invalid XPath '$nope': Undefined variable"),
    ],
)
def test_an_invalid_selector_is_shown_as_an_error(admin_client, shop, kind, selector, reason):
    html = try_url(admin_client, f"{shop.url}/shop", selector=selector, selector_type=kind)
    assert f'<p class="errornote">selector: {escape(reason)}' in html
    assert "Items (1)" in html, "the rest of the report is still there"


def test_a_selector_on_a_failed_trial_says_nothing_was_fetched(admin_client):
    html = try_url(admin_client, f"http://127.0.0.1:{free_port()}/", selector="a")
    assert '<p class="errornote">no page was fetched to try it on</p>' in html


def test_the_page_detail_is_grouped_and_lists_links_out_items_and_assets(admin_client, project):
    page = add_page(project, "http://a.test/", state="done", status_code=200, title="Home", fetch_count=2)
    child = add_page(project, "http://a.test/child", discovered_from=page, depth=1)
    add_page(project, "http://a.test/elsewhere")
    Item.objects.create(project=project, page=page, kind="page", data={"title": "Home", "links": [{"url": "x"}]})
    asset = MediaAsset.objects.create(project=project, url="http://a.test/i.jpg", url_key="5" * 64, kind="image")
    PageAsset.objects.create(page=page, asset=asset)
    html = admin_client.get(f"/admin/crawl/page/{page.id}/change/").content.decode()
    for group in ("Fetch", "Content", "Freshness", "Frontier", "Links out", "Items", "Assets"):
        assert f'class="fieldset-heading">{group}</h2>' in html, group
    assert f'<a href="/admin/crawl/page/{child.id}/change/">http://a.test/child</a>' in html
    assert "http://a.test/elsewhere" not in html, "only the pages discovered on this one"
    assert '<th scope="row">links</th><td><code>[{&quot;url&quot;: &quot;x&quot;}]</code></td>' in html
    assert f'<a href="/admin/media/mediaasset/{asset.id}/change/">http://a.test/i.jpg</a>' in html
    assert "none stored" in html, "no body yet"
    PageContent.objects.create(page=page, body=zlib.compress(b"<p>hi</p>"))
    html = admin_client.get(f"/admin/crawl/page/{page.id}/change/").content.decode()
    assert f'href="/admin/crawl/page/{page.id}/body/"' in html


def test_an_empty_page_detail_says_none(admin_client, project):
    page = add_page(project, "http://a.test/lonely")
    html = admin_client.get(f"/admin/crawl/page/{page.id}/change/").content.decode()
    assert len(re.findall(r'<div class="readonly">none\s*</div>', html)) == 3, "links out, items and assets"


def test_the_stored_body_is_served_as_plain_text_only(admin_client, project):
    page = add_page(project, "http://a.test/x", state="done")
    body = "<script>alert('café')</script>".encode("latin-1")
    headers = {"content-type": "text/html; charset=iso-8859-1"}
    PageContent.objects.create(page=page, headers=headers, body=zlib.compress(body))
    response = admin_client.get(f"/admin/crawl/page/{page.id}/body/")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response.content.decode("utf-8") == "<script>alert('café')</script>"


def test_a_page_without_a_stored_body_says_so(admin_client, project):
    page = add_page(project, "http://a.test/never")
    response = admin_client.get(f"/admin/crawl/page/{page.id}/body/")
    assert response.status_code == 404
    assert "has no stored body" in response.content.decode()


def test_the_stored_body_needs_the_view_permission(client, django_user_model, project):
    page = add_page(project, "http://a.test/x")
    PageContent.objects.create(page=page, body=zlib.compress(b"secret"))
    staff = django_user_model.objects.create_user("staff", password="x", is_staff=True)
    client.force_login(staff)
    assert client.get(f"/admin/crawl/page/{page.id}/body/").status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_page"))
    assert client.get(f"/admin/crawl/page/{page.id}/body/").status_code == 404, "not one of the staff's projects"
    ProjectAccess.objects.create(project=project, user=staff)
    assert client.get(f"/admin/crawl/page/{page.id}/body/").content == b"secret"


def test_the_diff_marks_added_and_removed_lines_with_numbers_and_escapes_them(admin_client, project):
    page = add_page(project, "http://a.test/news")
    now = timezone.now()
    old = "Intro. " + " ".join(f"Line {i}." for i in range(10)) + " The <b>old</b> news."
    new = "Intro. " + " ".join(f"Line {i}." for i in range(10)) + " The <i>new</i> news. And more."
    a, b = (
        PageVersion.objects.create(
            page=page, fetched_at=now - timedelta(hours=n), content_sha256="", text_hash="", text=t
        )
        for n, t in ((1, old), (0, new))
    )
    html = admin_client.get(f"/admin/crawl/page/{page.id}/diff/", {"a": a.id, "b": b.id}).content.decode()
    assert '<td class="diff-text"><del>-The &lt;b&gt;old&lt;/b&gt; news.</del></td>' in html
    assert '<td class="diff-text"><ins>+The &lt;i&gt;new&lt;/i&gt; news.</ins></td>' in html
    assert '<tr class="diff-del"><td class="diff-num">12</td><td class="diff-num"></td>' in html
    assert '<tr class="diff-add"><td class="diff-num"></td><td class="diff-num">13</td>' in html
    assert '<tr class="diff-same"><td class="diff-num">11</td><td class="diff-num">11</td>' in html
    assert '<tr class="diff-gap">' in html, "the unchanged start is left out"
    assert "Line 5." not in html and "<b>" not in html


def test_the_diff_of_equal_texts_says_so(admin_client, project):
    page = add_page(project, "http://a.test/same")
    a, b = (
        PageVersion.objects.create(page=page, fetched_at=timezone.now(), content_sha256="", text_hash="", text="Same.")
        for _ in range(2)
    )
    html = admin_client.get(f"/admin/crawl/page/{page.id}/diff/", {"a": a.id, "b": b.id}).content.decode()
    assert "No difference in the visible text." in html


def test_the_browsers_favicon_request_finds_an_icon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("console/favicon.svg")


def test_a_page_is_a_record_to_view_without_save_or_delete(admin_client):
    from crawl.models import Page
    from tests.console.test_admin_console import add_page

    page = add_page(Project.objects.create(name="rec", slug="rec"), "http://a.test/", "done")
    html = admin_client.get(f"/admin/crawl/page/{page.id}/change/").content.decode()
    assert "View page" in html and "Change page" not in html
    assert 'name="_save"' not in html and "deletelink" not in html
    assert admin_client.post(f"/admin/crawl/page/{page.id}/delete/", {"post": "yes"}).status_code == 403
    assert Page.objects.filter(id=page.id).exists()


def test_a_jobs_page_shows_its_report_first_and_refreshes_while_it_runs(admin_client):
    from console.models import Job
    from console.runs import jobs, steering

    project = Project.objects.create(name="jp", slug="jp")
    job, _ = jobs.job_begin(project=project, kind=Job.Kind.CRAWL, trigger=Job.Trigger.ADMIN)
    html = admin_client.get(f"/admin/console/job/{job.id}/change/").content.decode()
    assert '<meta http-equiv="refresh" content="5">' in html
    assert html.index('class="job-report"') < html.index("field-created_at"), "the report above the details"
    steering.job_cancel(job=job)
    assert 'http-equiv="refresh"' not in admin_client.get(f"/admin/console/job/{job.id}/change/").content.decode()


def test_the_hosts_list_names_its_status_column_for_what_it_holds(admin_client):
    from crawl.models import Host

    Host.objects.create(host="calm.test")
    Host.objects.create(host="busy.test", last_status=429)
    html = admin_client.get("/admin/crawl/host/").content.decode()
    assert "Last status" not in html and "Back-off status" in html
    assert '<td class="field-backoff_status">429</td>' in html and '<td class="field-backoff_status">none</td>' in html


def test_superscript_digits_in_an_id_parameter_are_a_client_error_not_a_500(admin_client, project):
    page = add_page(project, "http://a.test/digits")
    admin_client.raise_request_exception = False
    answers = [
        admin_client.get(f"/admin/crawl/page/{page.id}/diff/", {"a": "²", "b": "³"}),
        admin_client.get("/admin/dashboard/data/", {"project": "²"}),
        admin_client.post("/admin/dashboard/control/", {"project": "²", "action": "pause"}),
        admin_client.get("/admin/crawl/page/", {"project__id__exact": "²"}),
    ]
    assert all(a.status_code < 500 for a in answers), [a.status_code for a in answers]
