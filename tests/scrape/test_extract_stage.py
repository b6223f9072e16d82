"""The extract stage on the real database (scrape.extraction, scrape.services): each rule set's items are
of its own kind, a response that is not HTML is done without being parsed, nofollow is obeyed, a
spider's request keeps its route across a redirect, a regex that backtracks catastrophically is
reported on its item, and stored JSON is mended only where PostgreSQL would refuse it."""

import hashlib
import logging
import time
import zlib
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from console.models import Job
from console.runs.jobs import job_counts
from console.selectors import project_progress
from crawl.models import Page, PageContent, Project
from scrape.extraction import extract_page
from scrape.models import Item, RuleSet
from scrape.rules import RuleError
from scrape.services import items_store, pages_extract
from tests.core.test_patterns import BOUND, SLOW

DOCS_PAGE = (Path(__file__).parents[1] / "fixtures" / "docs_page.html").read_bytes()


def add_page(project: Project, path: str, **fields) -> Page:
    url = f"http://a.test{path}"
    key = hashlib.sha256(url.encode()).hexdigest()
    return Page.objects.create(project=project, url=url, url_key=key, host="a.test", **fields)


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


def test_a_catastrophic_field_regex_is_reported_on_the_item_through_the_real_extraction(db, caplog):
    project = Project.objects.create(name="redos", slug="redos")
    spec = {"fields": {"title": {"css": "h1"}, "code": {"css": "p.code", "regex": SLOW}}}
    RuleSet.objects.create(project=project, name="slow", spec=spec)  # saved: the pattern passes validation
    project.refresh_from_db()
    page = Page.objects.create(
        project=project, url="http://a.test/", url_key="0" * 64, host="a.test", content_type="text/html"
    )
    body = f'<h1>Hi</h1><p class="code">{"a" * 5000}!</p>'.encode()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="crawlhub.patterns"):
        items_store([extract_page(page, body, {"content-type": "text/html"})])
    assert time.monotonic() - started < BOUND
    item = Item.objects.get(page=page, kind="rule:slow")
    assert item.data == {"title": "Hi", "code": None}
    assert item.errors == [f"code: regex {SLOW!r} timed out (catastrophic backtracking): no match"]
    assert "gave up after" in caplog.text
