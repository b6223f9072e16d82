"""Extraction fixes: text keeps its word boundaries, a rule set's items are of its own kind, pattern
lists split on lines only, every way in validates the list fields, and a response that is not HTML
is done without being parsed."""

import hashlib
import zlib

import pytest
from django.core.exceptions import ValidationError
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from console.jobs import job_counts
from console.models import Job
from console.selectors import project_progress
from core.canonical import parse_lines
from crawl.frontier.discovery import project_scope
from crawl.models import Page, PageContent, Project
from scrape.decide import extract_page
from scrape.extractors import extract_html
from scrape.models import Item, RuleSet
from scrape.rules import RuleError
from scrape.services import items_store, pages_extract
from tests.console.test_admin_console import add_form_data

PROJECTS = "/admin/crawl/project/"
DOCS_PAGE = b"""<!doctype html>
<html lang="en"><head><title>crawlhub docs</title><style>h1 { color: red }</style></head>
<body>
<nav><a href="/">Home</a> | <a href="/guide/">Guide</a></nav>
<main>
  <h1>Installing crawl<span>hub</span></h1>
  <p>Install it with <code>pip</code>, then run
     the <em>migrate</em> command.</p>
  <h2>Requirements</h2>
  <ul><li>Python 3.11</li><li>PostgreSQL<br>16 or newer</li></ul>
  <ol><li><p>Clone</p></li><li>Configure</li></ol>
  <table>
    <thead><tr><th>Setting</th><th>Default</th></tr></thead>
    <tbody><tr><td>CRAWL_MAX_ATTEMPTS</td><td>3</td></tr><tr><td>min_delay</td><td>0.0</td></tr></tbody>
  </table>
  <pre><code>make migrate
make serve</code></pre>
  <dl><dt>Seed</dt><dd>A start URL.</dd></dl>
  <blockquote>Be polite.</blockquote><div>Last <b>up</b>dated: today</div>
  <script>var hidden = "never text";</script>
</main>
<footer><p>&copy; crawlhub</p></footer>
</body></html>"""


def text_of(html: bytes) -> str:
    return extract_html(html, "https://docs.example/").text


def add_page(project: Project, path: str, **fields) -> Page:
    url = f"http://a.test{path}"
    key = hashlib.sha256(url.encode()).hexdigest()
    return Page.objects.create(project=project, url=url, url_key=key, host="a.test", **fields)


# --- 1. Text keeps word boundaries ------------------------------------------------------------


def test_it_separates_blocks_and_keeps_inline_words_whole():
    html = b"<h1>Title</h1><p>First para.</p><p>Second</p><ul><li>one</li><li>two</li></ul>"
    assert text_of(html) == "Title\nFirst para.\nSecond\none\ntwo"
    assert text_of(b"<p>wo<b>rd</b></p>") == "word"


def test_it_keeps_the_word_boundaries_of_a_documentation_page():
    assert text_of(DOCS_PAGE).split("\n") == [
        "Home | Guide",
        "Installing crawlhub",
        "Install it with pip, then run the migrate command.",
        "Requirements",
        "Python 3.11",
        "PostgreSQL",
        "16 or newer",
        "Clone",
        "Configure",
        "Setting Default",
        "CRAWL_MAX_ATTEMPTS 3",
        "min_delay 0.0",
        "make migrate",
        "make serve",
        "Seed",
        "A start URL.",
        "Be polite.",
        "Last updated: today",
        "\u00a9 crawlhub",
    ]


# --- 2. A rule set's items are of its own kind -----------------------------------------------


def test_two_unnamed_rule_sets_of_a_project_make_two_kinds_of_items_on_one_page(db):
    project = Project.objects.create(name="two-rules", slug="two-rules")
    RuleSet.objects.create(project=project, name="titles", spec={"fields": {"t": {"css": "h1"}}})
    RuleSet.objects.create(project=project, name="codes", spec={"fields": {"c": {"css": "code"}}})
    project.refresh_from_db()  # the rules_changed_at stamp the rule sets moved
    page = add_page(project, "/docs", content_type="text/html", status_code=200)
    result = extract_page(page, DOCS_PAGE, {})
    items_store([result])
    items = dict(Item.objects.filter(page=page).values_list("kind", "data"))
    assert sorted(items) == ["page", "rule:codes", "rule:titles"]
    assert (items["rule:codes"], items["rule:titles"]) == ({"c": "pip"}, {"t": "Installing crawlhub"})


def test_the_spec_name_overrides_the_kind_but_never_takes_another_rule_sets(db, admin_client):
    project = Project.objects.create(name="kinds", slug="kinds")
    RuleSet.objects.create(project=project, name="products", spec={"fields": {"t": {"css": "h1"}}})
    named = RuleSet(project=project, name="listing", spec={"name": "offers", "fields": {"t": {"css": "h2"}}})
    named.save()
    assert named.kind == "rule:offers"
    clash = RuleSet(project=project, name="other", spec={"name": "products", "fields": {"t": {"css": "h3"}}})
    with pytest.raises(ValidationError) as refused:
        clash.full_clean()
    (message,) = refused.value.message_dict["spec"]
    assert message.startswith("rule set 'products' of this project already makes items of kind 'rule:products'")
    with pytest.raises(RuleError, match="rule:products"):
        clash.save()
    response = admin_client.post(
        "/admin/scrape/ruleset/add/",
        {"project": project.id, "name": "offers", "enabled": "on", "spec": '{"fields": {"t": {"css": "p"}}}'},
    )
    assert response.status_code == 200, "refused: rule set 'listing' makes rule:offers"
    (message,) = response.context["adminform"].form.errors["name"]
    assert message.startswith("rule set 'listing' of this project already makes items of kind 'rule:offers'")
    assert RuleSet.objects.filter(project=project).count() == 2


# --- 3. Pattern lists split on lines only ----------------------------------------------------


def test_a_pattern_with_a_comma_stays_one_pattern_in_the_crawl_scope(db):
    project = Project.objects.create(name="p", slug="p", allowed_domains="a.test", allow_patterns=r"/p\d{1,3}\.html")
    assert parse_lines("/a/\n/p\\d{1,3}\\.html\r\n\n") == ["/a/", r"/p\d{1,3}\.html"]
    scope = project_scope(project)
    assert scope.rejects("http://a.test/p12.html", 0) is None
    assert scope.rejects("http://a.test/p1234.html", 0) == "not_allowed"


# --- 4. The same validators on every way in --------------------------------------------------


def test_the_model_refuses_a_bad_regex_naming_its_line():
    project = Project(name="bad", slug="bad", deny_patterns="/ok/\n\n(unclosed")
    with pytest.raises(ValidationError) as refused:
        project.full_clean(validate_unique=False)
    (message,) = refused.value.message_dict["deny_patterns"]
    assert message.startswith("line 3: '(unclosed' is not a regular expression: missing ), unterminated subpattern")


def test_the_admin_refuses_bad_patterns_and_lists_naming_the_line(admin_client):
    data = add_form_data(admin_client.get(f"{PROJECTS}add/"))
    data |= {
        "name": "refused",
        "slug": "refused",
        "allow_patterns": r"/p\d{1,3}\.html" + "\n[a-",
        "media_page_patterns": "(?P<x",
        "media_extensions": ".jpg, .mp4",
        "media_mime_types": "image/*\nvideo",
        "allowed_domains": "a.test, b.test",
    }
    response = admin_client.post(f"{PROJECTS}add/", data)
    assert response.status_code == 200, "the form comes back with the errors"
    errors = response.context["adminform"].form.errors
    assert errors["allow_patterns"][0].startswith("line 2: '[a-' is not a regular expression")
    assert errors["media_page_patterns"][0].startswith("line 1: '(?P<x' is not a regular expression")
    assert errors["media_extensions"] == ["line 1: '.jpg, .mp4' is not a file extension (one per line)"]
    assert errors["media_mime_types"] == ["line 2: 'video' is not a MIME type (one per line)"]
    assert errors["allowed_domains"] == ["line 1: 'a.test, b.test' is not one host name (one per line)"]
    assert not Project.objects.filter(slug="refused").exists()


def test_the_api_refuses_a_bad_regex_naming_the_line_and_takes_a_good_one(django_user_model):
    Project.objects.create(name="api", slug="api")
    token = Token.objects.create(user=django_user_model.objects.create_user("operator", is_superuser=True))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    bad = api.patch("/api/projects/api/", {"gallery_page_patterns": "/album/\n*oops"}, format="json")
    assert bad.status_code == 400
    assert bad.json()["gallery_page_patterns"][0].startswith("line 2: '*oops' is not a regular expression")
    bad = api.patch("/api/projects/api/", {"media_mime_types": "image/png,video/mp4"}, format="json")
    assert bad.json()["media_mime_types"] == ["line 1: 'image/png,video/mp4' is not a MIME type (one per line)"]
    good = api.patch("/api/projects/api/", {"allow_patterns": r"/p\d{1,3}\.html"}, format="json")
    assert good.status_code == 200
    assert Project.objects.get(slug="api").allow_patterns == r"/p\d{1,3}\.html"


# --- 5. A response that is not HTML is done, not parsed --------------------------------------


def test_a_non_html_response_is_done_not_parsed_and_counted_apart(db):
    project = Project.objects.create(name="files", slug="files")
    pdf = b"%PDF-1.7\n" + bytes(range(256)) * 4
    pages = {
        "/guide.pdf": ("application/pdf", pdf),
        "/page.html": ("text/html", b"<html><body><p>Hello</p><a href='/next'>next</a></body></html>"),
        "/setup.py": ("text/plain; charset=utf-8", b"from setuptools import setup\nsetup(name='x')\n"),
    }
    ids = []
    for path, (content_type, body) in pages.items():
        page = add_page(project, path, state="fetched", status_code=200, content_type=content_type)
        PageContent.objects.create(page=page, headers={"content-type": content_type}, body=zlib.compress(body))
        ids.append(page.id)
    pages_extract(page_ids=ids)
    pdf_page, html_page = Page.objects.get(id=ids[0]), Page.objects.get(id=ids[1])
    assert (pdf_page.state, pdf_page.error_code, pdf_page.parsed) == ("done", "", False)
    assert pdf_page.content_type == "application/pdf"
    assert not Item.objects.filter(page=pdf_page).exists(), "no items"
    assert not Page.objects.filter(discovered_from=pdf_page).exists(), "no links"
    assert (html_page.state, html_page.parsed) == ("done", True)
    source = Page.objects.get(id=ids[2])
    assert (source.state, source.error_code, source.parsed) == ("done", "", False), "a text/plain page is done"
    assert project_progress(project)["pages_not_parsed"] == 2
    job = Job.objects.create(project=project)
    Page.objects.filter(id__in=ids).update(job_id=job.id)  # as the stages stamp a job's rows
    counts = job_counts(job)
    assert (counts["pages_done"], counts["pages_not_parsed"], counts["pages_failed"]) == (3, 2, 0)


def test_a_page_parsed_again_once_it_is_html_and_binary_served_as_html_still_fails(db):
    project = Project(name="x", slug="x")
    html = extract_page(Page(project=project, url="http://a.test/", content_type="text/html"), b"<p>Hi</p>", {})
    assert html.changes["parsed"] is True, "a page not parsed before is marked parsed again"
    pdf = extract_page(Page(project=project, url="http://a.test/f", content_type="application/pdf"), b"%PDF", {})
    assert (pdf.failed, pdf.changes, pdf.links, pdf.items) == (False, {"parsed": False, "title": ""}, [], [])
    binary = extract_page(Page(project=project, url="http://a.test/b", content_type="text/html"), b"\x89PNG\x00", {})
    assert binary.error[0] == "not_html"


def test_nofollow_links_and_meta_robots_nofollow_pages_are_not_followed(db):
    project = Project.objects.create(name="nf", slug="nf")
    page = add_page(project, "/nf", status_code=200, content_type="text/html")
    html = b'<a href="/a">a</a><a href="/b" rel="nofollow">b</a><a href="/c" rel="UGC NoFollow">c</a>'
    followed = [link.url for link in extract_page(page, html, {"content-type": "text/html"}).links]
    assert followed == ["http://a.test/a"]
    meta = b'<head><meta name="Robots" content="noindex, nofollow"></head><a href="/a">a</a>'
    assert extract_page(page, meta, {"content-type": "text/html"}).links == []
    Project.objects.filter(id=project.id).update(obey_robots=False)
    page = Page.objects.select_related("project").get(id=page.id)
    assert len(extract_page(page, html, {"content-type": "text/html"}).links) == 3, "obeyed with robots.txt only"


def test_a_spider_request_keeps_its_route_and_meta_across_a_redirect(db):
    project = Project.objects.create(name="rd", slug="rd")
    request = {"method": "POST", "body": "q=1", "route": "results", "meta": {"q": 1}}
    for status, method in ((302, None), (307, "POST")):
        page = add_page(project, f"/r{status}", status_code=status, request=request)
        Page.objects.filter(id=page.id).update(final_url="http://a.test/there")
        page.refresh_from_db()
        (link,) = extract_page(page, b"", {"location": "/there"}).links
        assert (link.request.get("route"), link.request.get("meta")) == ("results", {"q": 1})
        assert link.request.get("method") == method, status


def test_stored_json_is_mended_only_where_the_database_would_refuse_it():
    from scrape.services import _jsonb_safe

    clean = {"links": [{"url": "http://a.test/", "text": "é 漢字"}], "n": 1.5, "t": ("a", None)}
    assert _jsonb_safe(clean) is clean  # nothing to mend: the same object, not a copy
    written = {"text": "a backslash-u escape written out: \\u0000"}
    assert _jsonb_safe(written) == written  # text, not a NUL: kept as it is
    dirty = {"a\ud800": ["x\x00y", {"deep": float("nan")}, float("inf")], "ok": "fine"}
    assert _jsonb_safe(dirty) == {"a\ufffd": ["x\ufffdy", {"deep": None}, None], "ok": "fine"}
    assert _jsonb_safe("nul\x00") == "nul\ufffd" and _jsonb_safe([]) == []
