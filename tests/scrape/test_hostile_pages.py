"""Pages built to make unbounded work: deep JSON-LD, and (below) too many items, media references,
OpenGraph keys and JSON-LD blocks. Each is bounded when parsed, the excess counted, and a batch
holding such a page finishes with its batch-mates."""

import json

import pytest

from crawl.models import MediaAsset, Page, Project
from crawl.services.projects import seeds_add
from fetch.services import pages_fetch
from scrape.extractors import extract_html
from scrape.metadata import MAX_JSON_LD_DEPTH
from scrape.models import Item, RuleSet
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


def test_a_page_keeps_at_most_half_a_megabyte_of_json_ld():
    block = ld(json.dumps({"text": "x" * 150_000}))
    extraction = extract_html(page_with(block * 10), "http://a.test/")
    assert len(extraction.json_ld) == 3


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


def test_a_page_keeps_capped_title_description_headings_and_text():
    long = "w " * 100_000
    head = f'<meta name="description" content="{long}">'
    body = "".join(f"<h2>{'h ' * 500}</h2>" for _ in range(150)) + f"<p>{long * 2}</p>"
    extraction = extract_html(
        f"<html><head><title>{long}</title>{head}</head><body>{body}</body></html>".encode(), "http://a.test/"
    )
    assert len(extraction.title) <= 1000 and len(extraction.description) <= 2000
    assert len(extraction.headings) == 100 and max(len(h["text"]) for h in extraction.headings) <= 300
    assert len(extraction.text) <= 100_000


def test_a_page_keeps_capped_media_opengraph_and_json_ld_and_counts_the_rest():
    images = "".join(f'<img src="/i{n}.jpg">' for n in range(1500))
    og = "".join(f'<meta property="og:k{n}" content="v">' for n in range(300))
    blocks = ld(json.dumps([{"n": n} for n in range(80)]))
    extraction = extract_html(page_with(og + blocks, images), "http://a.test/")
    assert (len(extraction.media), len(extraction.opengraph), len(extraction.json_ld)) == (1000, 100, 50)
    assert extraction.dropped == {"media": 500, "opengraph": 200, "json_ld": 30}
    assert len(extract_html(page_with(og, images), "http://a.test/", caps={"media": 10}).media) == 10


@pytest.mark.django_db
def test_one_page_makes_a_capped_number_of_items_and_downloads_and_says_so(settings, admin_client):
    settings.CRAWL_MAX_ITEMS_PER_PAGE, settings.CRAWL_MAX_MEDIA_PER_PAGE = 100, 40
    rows = "".join(f'<li class="p"><b>n{n}</b><img src="/i{n}.jpg"></li>' for n in range(3000))
    site = Site(default=(200, HTML, page_with(body=f"<ul>{rows}</ul>")))
    with SiteServer(site) as server:
        project = Project.objects.create(
            name="many", slug="many", allow_private=True, obey_robots=False, download_media=True
        )
        RuleSet.objects.create(project=project, name="p", spec={"name": "p", "item_selector": "li.p", "fields": {
            "name": {"css": "b"}}})  # fmt: skip
        ids = seeds_add(project=project, urls=[f"{server.url}/list"])
        pages_extract(page_ids=pages_fetch(page_ids=ids))
        tried = admin_client.post("/admin/tryurl/", {"url": f"{server.url}/list", "project": project.id})
    assert Item.objects.filter(project=project).count() == 100
    assert MediaAsset.objects.filter(project=project).count() == 40
    page_item = Item.objects.get(project=project, kind="page")
    assert page_item.data["dropped"] == {"media": 2960, "items": 2901}
    html = tried.content.decode()
    assert "Over the per-page caps" in html and "Items (100, the first 50 shown)" in html
    assert len(html) < 3_000_000


@pytest.mark.django_db
def test_the_browsable_api_and_the_item_detail_cut_a_huge_value_short(admin_client):
    project = Project.objects.create(name="huge", slug="huge")
    page = Page.objects.create(project=project, url="http://a.test/", url_key="h" * 64, host="a.test")
    item = Item.objects.create(project=project, page=page, kind="page", data={"text": "x" * 3_000_000})
    browsable = admin_client.get("/api/items/", headers={"Accept": "text/html"})
    assert browsable.status_code == 200 and len(browsable.content) < 1_000_000
    assert "more characters: add ?format=json" in browsable.content.decode()
    whole = admin_client.get("/api/items/?format=json")
    assert whole.json()["results"][0]["data"]["text"] == "x" * 3_000_000
    detail = admin_client.get(f"/admin/scrape/item/{item.id}/change/")
    assert detail.status_code == 200 and len(detail.content) < 1_000_000
