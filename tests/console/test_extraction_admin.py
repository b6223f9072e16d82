"""Extraction in the admin: a bad rule is refused with its reason; the Try-a-URL page; fingerprints."""

import json
from pathlib import Path

import pytest

from crawl.models import Page, Project
from crawl.services.projects import project_get_or_create
from scrape.extraction import extract_page
from scrape.models import Item, RuleSet
from tests.servers import Site, SiteServer

HTML = {"Content-Type": "text/html; charset=utf-8"}


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"fields": {"title": {"css": "h2[["}}}, "title"),
        ({"fields": {"price": {"css": ".p", "regex": "([0-9"}}}, "price"),
        ({"fields": {"x": {"xpath": "//div[@"}}}, "x"),
        ({"id_regex": r"item-(\d+)", "download_url_fmt": "https://cdn.test/{name}.zip"}, "download_url_fmt"),
    ],
)
def test_it_refuses_a_bad_rule_when_saved_and_says_why(admin_client, spec, reason):
    project = project_get_or_create(name="rules")
    response = admin_client.post(
        "/admin/scrape/ruleset/add/",
        {"project": project.id, "name": "bad", "enabled": "on", "spec": json.dumps(spec)},
    )
    assert response.status_code == 200, "the form comes back with an error instead of saving"
    errors = str(response.context["adminform"].form.errors)
    assert reason in errors
    assert not RuleSet.objects.exists()


def test_the_try_a_url_page_shows_the_extraction_and_stores_nothing(admin_client):
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    site.files["/p"] = (200, HTML, b'<html><head><title>Tried</title></head><body><a href="/next">n</a></body></html>')
    with SiteServer(site) as server:
        response = admin_client.post("/admin/tryurl/", {"url": f"{server.url}/p", "allow_private": "on"})
    html = response.content.decode()
    assert response.status_code == 200
    assert "Tried" in html
    assert f"{server.url}/next" in html
    assert Page.objects.count() == Item.objects.count() == 0


def test_the_try_a_url_page_needs_a_staff_login(client):
    assert client.get("/admin/tryurl/").status_code == 302


def test_the_same_text_at_two_urls_gets_the_same_fingerprint(db):
    project = Project(name="fp", slug="fp")
    body = b"<html><body><p>Same words here, updated 2026-11-22 10:00.</p></body></html>"
    other = b"<html><body><p>Same words here, updated 2026-11-23 18:30.</p></body></html>"
    results = [
        extract_page(Page(project=project, url=f"http://a.test/{i}", content_type="text/html"), b, {})
        for i, b in enumerate((body, other))
    ]
    first, second = (r.changes for r in results)
    assert first["text_hash"] == second["text_hash"], "a changing timestamp is not a content change"
    assert first["simhash"] == second["simhash"]


def test_the_page_item_keeps_links_with_anchor_text_and_main_text_when_asked(db):
    article = (Path(__file__).parents[1] / "fixtures" / "article.html").read_bytes()
    plain = Project(name="plain", slug="plain")
    reader = Project(name="reader", slug="reader", main_text=True)
    url = "https://news.example.com/2026/11/park.html"
    item = extract_page(Page(project=plain, url=url, content_type="text/html"), article, {}).items[0].data
    assert item["link_count"] == len(item["links"]) > 0
    assert {"url", "text", "nofollow"} == set(item["links"][0])
    assert any(link["nofollow"] for link in item["links"])
    assert "main_text" not in item
    main = extract_page(Page(project=reader, url=url, content_type="text/html"), article, {}).items[0].data
    assert "riverside park" in main["main_text"].lower()
