"""Extraction in the pipeline, with real workers: declarative rules (and re-extraction without
refetching), the ID scraper, JSON API mode with schema validation, a Python spider, tryurl, and a
rule whose regex backtracks catastrophically."""

import json
import time
from urllib.parse import urlsplit

import pytest

from bench.check import canon_path
from crawl.models import MediaAsset, Page, Project
from crawl.services.projects import project_get_or_create
from scrape.models import Item, RuleSet
from tests.conftest import run_manage
from tests.core.test_patterns import HOSTILE, SLOW
from tests.servers import NOT_FOUND, Site, SiteServer

pytestmark = pytest.mark.integration
HTML = {"Content-Type": "text/html; charset=utf-8"}
JSON = {"Content-Type": "application/json"}


def product_html(n: int, price: str) -> str:
    return (
        f'<div class="product"><h2 class="name">Product {n}</h2><span class="price">${price}</span>'
        f'<ul><li class="tag">t{n}</li><li class="tag">all</li></ul><a class="more" href="/product/{n}.html">more</a>'
        f"<p>ref item-{n}</p></div>"
    )


def shop_site() -> Site:
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    site.files["/"] = (200, HTML, b'<a href="/category/1.html">1</a><a href="/category/2.html">2</a>')
    for c in (1, 2):
        products = "".join(product_html(n, f"{n}.50") for n in range(c * 10, c * 10 + 3))
        site.files[f"/category/{c}.html"] = (
            200,
            HTML,
            f"<html><body><h1>Category {c}</h1>{products}</body></html>".encode(),
        )
    for n in (10, 11, 12, 20, 21, 22):
        body = (
            f'<html><body><h1>Product {n}</h1><span class="price">{n}.50</span><img src="/img/{n}.jpg"></body></html>'
        )
        site.files[f"/product/{n}.html"] = (200, HTML, body.encode())
        site.files[f"/img/{n}.jpg"] = (200, {"Content-Type": "image/jpeg"}, b"\xff\xd8\xff\xe0" + bytes([n]) * 100)
        site.files[f"/files/{n}.zip"] = (200, {"Content-Type": "application/zip"}, b"PK\x03\x04" + bytes([n]) * 50)
    return site


RULES = {
    "name": "products",
    "url_patterns": ["/category/"],
    "item_selector": "div.product",
    "fields": {
        "title": {"css": "h2.name"},
        "price": {"css": ".price", "regex": "([0-9.]+)", "type": "float"},
        "tags": {"xpath": ".//li[@class='tag']/text()", "many": True},
        "link": {"css": "a.more", "attr": "href", "absolute": True},
    },
    "required": ["title", "price"],
}


def start(workers):
    for stage in ("fetch", "extract", "download"):
        workers.start(stage, stage)


def crawl(env, url, project):
    done = run_manage(["crawl", url, "--workers", "0", "--project", project, "--timeout", "120"], env)
    assert done.returncode == 0, done.stdout + done.stderr


def rule_items(project: str) -> dict[str, dict]:
    items = Item.objects.filter(project__slug=project, kind="rule:products")
    return {i.data["title"]: i for i in items}


def test_css_rules_yield_one_item_per_product_and_reextraction_needs_no_request(workers, worker_env):
    with SiteServer(shop_site()) as server:
        project = project_get_or_create(name="shop", allow_private=True, download_media=False)
        RuleSet.objects.create(project=project, name="products", spec=RULES)
        start(workers)
        crawl(worker_env, f"{server.url}/", "shop")
        items = rule_items("shop")
        assert set(items) == {f"Product {n}" for n in (10, 11, 12, 20, 21, 22)}
        first = items["Product 11"]
        assert first.data == {
            "title": "Product 11",
            "price": 11.5,
            "tags": ["t11", "all"],
            "link": f"{server.url}/product/11.html",
        }
        assert first.errors == []

        requests_before = len(server.log)
        rules = RuleSet.objects.get(project=project)
        rules.spec = {**RULES, "fields": {**RULES["fields"], "currency": {"css": ".price", "regex": "([$])"}}}
        rules.save()
        done = run_manage(["reextract", "shop", "--wait"], worker_env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert len(server.log) == requests_before, "re-extraction made no HTTP request"
    items = rule_items("shop")
    assert {i.data["currency"] for i in items.values()} == {"$"}
    assert {i.rule_version for i in items.values()} == {rules.version}


def test_the_id_scraper_turns_ids_into_download_jobs(workers, worker_env):
    with SiteServer(shop_site()) as server:
        project = project_get_or_create(name="ids", allow_private=True)
        spec = {
            "name": "ids",
            "url_patterns": ["/category/"],
            "id_regex": r"item-(\d+)",
            "download_url_fmt": f"{server.url}/files/{{id}}.zip",
        }
        RuleSet.objects.create(project=project, name="ids", spec=spec)
        start(workers)
        crawl(worker_env, f"{server.url}/", "ids")
    downloads = {canon_path(a.url): a for a in MediaAsset.objects.filter(project__slug="ids", kind="file")}
    assert set(downloads) == {f"/files/{n}.zip" for n in (10, 11, 12, 20, 21, 22)}
    assert {a.state for a in downloads.values()} == {"done"}


def api_site() -> Site:
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    pages = {
        1: [
            {"id": 1, "attributes": {"name": "a", "price": 1.5}},
            {"id": 2, "attributes": {"name": "b", "price": "oops"}},
        ],
        2: [{"id": 3, "attributes": {"name": "c", "price": 3}}, {"id": 4, "attributes": {"price": 4}}],
        3: [{"id": 5, "attributes": {"name": "e", "price": 5}}],
    }
    answers = {}
    for n, records in pages.items():
        doc = {"data": records, "links": {"next": f"/api/items?page={n + 1}" if n < 3 else None}}
        answers[f"page={n}"] = (200, JSON, json.dumps(doc).encode())
    site.files["/api/items"] = lambda request: answers.get(urlsplit(request.path).query, NOT_FOUND)
    return site


API_CONFIG = {
    "records": "data",
    "fields": {"id": "id", "name": "attributes.name", "price": "attributes.price"},
    "schema": {
        "type": "object",
        "required": ["id", "name", "price"],
        "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "price": {"type": "number"}},
    },
    "next": {"link": "links.next"},
}


def test_a_json_api_project_keeps_valid_and_invalid_records_with_their_errors(workers, worker_env):
    with SiteServer(api_site()) as server:
        project_get_or_create(name="api", allow_private=True, api_config=API_CONFIG)
        start(workers)
        crawl(worker_env, f"{server.url}/api/items?page=1", "api")
    records = {i.data["id"]: i for i in Item.objects.filter(project__slug="api", kind="api")}
    assert set(records) == {1, 2, 3, 4, 5}
    assert {k for k, i in records.items() if not i.errors} == {1, 3, 5}
    assert any("price" in e for e in records[2].errors)
    assert any("name" in e for e in records[4].errors)


def test_a_spider_with_two_routes_handles_two_page_kinds_in_one_crawl(workers, worker_env):
    with SiteServer(shop_site()) as server:
        site = server.site
        for c in (1, 2):
            links = "".join(f'<a class="product" href="/product/{n}.html">p</a>' for n in range(c * 10, c * 10 + 3))
            site.files[f"/category/{c}.html"] = (
                200,
                HTML,
                f"<html><body><h1>Category {c}</h1>{links}</body></html>".encode(),
            )
        project_get_or_create(name="spider", allow_private=True, spider="example-shop")
        start(workers)
        crawl(worker_env, f"{server.url}/category/1.html", "spider")
    items = [i.data for i in Item.objects.filter(project__slug="spider", kind="spider")]
    assert [i for i in items if i["kind"] == "category"] == [{"kind": "category", "name": "Category 1", "products": 3}]
    assert sorted(i["title"] for i in items if i["kind"] == "product") == ["Product 10", "Product 11", "Product 12"]
    images = MediaAsset.objects.filter(project__slug="spider")
    assert {canon_path(a.url) for a in images} == {"/img/10.jpg", "/img/11.jpg", "/img/12.jpg"}


def test_tryurl_prints_the_whole_extraction_and_writes_nothing(worker_env):
    with SiteServer(shop_site()) as server:
        project = project_get_or_create(name="try", allow_private=True)
        RuleSet.objects.create(project=project, name="products", spec=RULES)
        counts = (Page.objects.count(), Item.objects.count(), MediaAsset.objects.count())
        done = run_manage(["tryurl", f"{server.url}/category/1.html", "--project", "try"], worker_env)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for expected in ("200", "Category 1", "Product 10", "10.5", "/product/10.html", "rule:products"):
        assert expected in out, expected
    assert (Page.objects.count(), Item.objects.count(), MediaAsset.objects.count()) == counts


@pytest.mark.integration
def test_a_worker_finishes_a_page_that_makes_a_rule_backtrack_catastrophically(workers, worker_env):
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    long_text = "a" * 5000 + "!"
    site.files["/"] = (200, HTML, f'<h1>Hi</h1><p class="code">{long_text}</p><a href="/{HOSTILE}">x</a>'.encode())
    with SiteServer(site) as server:
        project = project_get_or_create(name="redos-worker", allow_private=True, download_media=False)
        Project.objects.filter(id=project.id).update(deny_patterns=SLOW)
        spec = {"fields": {"code": {"css": "p.code", "regex": SLOW}}}
        RuleSet.objects.create(project=project, name="slow", spec=spec)
        for stage in ("fetch", "extract"):
            workers.start(stage, stage, concurrency=1)
        started = time.monotonic()
        done = run_manage(
            ["crawl", f"{server.url}/", "--workers", "0", "--project", "redos-worker", "--timeout", "120"], worker_env
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert time.monotonic() - started < 60
    item = Item.objects.get(page__url=f"{server.url}/", kind="rule:slow")
    assert item.errors == [f"code: regex {SLOW!r} timed out (catastrophic backtracking): no match"]
    assert f"/{HOSTILE}" not in server.paths(), "a deny pattern that gives up denies the link"
    workers.stop_all(warm=True)
    assert "gave up after" in (workers.log_dir / "extract.log").read_text()
