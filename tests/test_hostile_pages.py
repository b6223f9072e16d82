"""Pages built to make unbounded work: deep JSON-LD, and (below) too many items, media references,
OpenGraph keys and JSON-LD blocks. Each is bounded when parsed, the excess counted, and a batch
holding such a page finishes with its batch-mates."""

import json

import pytest

from crawl.models import Page, Project
from crawl.services.fetching import pages_fetch
from crawl.services.projects import seeds_add
from scrape.extractors import extract_html
from scrape.metadata import MAX_JSON_LD_DEPTH
from scrape.services import pages_extract
from tests.servers import Site, SiteServer

HTML = {"Content-Type": "text/html; charset=utf-8"}


def page_with(head: str = "", body: str = "") -> bytes:
    return f"<html><head><title>t</title>{head}</head><body>{body}</body></html>".encode()


def ld(value: str) -> str:
    return f'<script type="application/ld+json">{value}</script>'


def nested(depth: int) -> str:
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


@pytest.mark.parametrize("depth", [900, 950, 5000])
def test_a_json_ld_block_nested_too_deeply_is_skipped(depth):
    extraction = extract_html(page_with(ld(nested(depth)) + ld('{"@type": "Thing"}')), "http://a.test/")
    assert extraction.json_ld == [{"@type": "Thing"}]


def test_a_json_ld_block_at_the_nesting_limit_is_kept():
    extraction = extract_html(page_with(ld(nested(MAX_JSON_LD_DEPTH))), "http://a.test/")
    assert len(extraction.json_ld) == 1 and json.dumps(extraction.json_ld).count("{") == MAX_JSON_LD_DEPTH


@pytest.mark.django_db
def test_a_page_of_deep_json_ld_and_its_batch_mates_are_extracted(admin_client):
    site = Site(default=(200, HTML, page_with(body="<p>plain</p>")))
    site.files["/deep"] = (200, HTML, page_with(ld(nested(950))))
    with SiteServer(site) as server:
        project = Project.objects.create(name="deep", slug="deep", allow_private=True, obey_robots=False)
        ids = seeds_add(project=project, urls=[f"{server.url}/deep", f"{server.url}/plain"])
        pages_extract(page_ids=pages_fetch(page_ids=ids))
    assert sorted(Page.objects.filter(id__in=ids).values_list("state", flat=True)) == ["done", "done"]
    for page_id in ids:
        assert admin_client.get(f"/admin/crawl/page/{page_id}/change/").status_code == 200
