"""scrape.spiders: routing, output collection, error capture, registry; the example spider. Pure: no database."""

import sys

import pytest

from scrape import spiders
from scrape.example_spiders import ExampleShopSpider
from scrape.spiders import (
    Follow,
    Media,
    Response,
    Spider,
    SpiderError,
    SpiderResult,
    get_spider,
    load_spider_modules,
    register,
    route,
    run_spider,
    spider_names,
)

SHOP = "https://shop.example.com"
# Saved pages of a small shop, in the markup scrape/example_spiders.py documents.
CATEGORY_PAGE = b"""<!doctype html>
<html><head><title>Lamps | Shop</title></head><body>
<h1>  Desk
  lamps </h1>
<ul>
  <li><a class="product card" href="/product/anglepoise">Anglepoise</a>
      <a class="product" href="/product/anglepoise">(again, image link)</a></li>
  <li><a class="product" href="https://shop.example.com/product/banker#reviews">Banker</a></li>
  <li><a class="products-all" href="/category/lamps?all">Not a product link</a></li>
</ul>
<a href="/category/lamps?page=2">Next</a>
</body></html>"""
PRODUCT_PAGE = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>Anglepoise</title></head><body>
<h1>Anglepoise Type 75 \xe2\x80\x93 black</h1>
<p class="price sale">$1,299.50</p>
<img class="logo" src="/static/logo.png">
<img class="product-image large" src="images/anglepoise.jpg">
</body></html>"""


def html_response(url: str, body: bytes = b"<html><body></body></html>", **headers) -> Response:
    return Response(url=url, status=200, headers={"Content-Type": "text/html", **headers}, body=body)


@pytest.fixture
def registry(monkeypatch):
    """An empty registry for this test, so that test spiders do not leak into others."""
    monkeypatch.setattr(spiders, "_REGISTRY", {})


class Routed(Spider):
    name = "routed"

    @route(r"/items/\d+")
    def item(self, response):
        yield {"handler": "item"}

    @route(r"/items/")
    def listing(self, response):
        return [{"handler": "listing"}]

    def default(self, response):
        return [{"handler": "default"}]


class Mixed(Spider):
    name = "mixed"

    @route(r"/page")
    def page(self, response):
        yield {"n": 1}
        yield Follow("next?p=2#top")
        yield Follow("/shop/next?p=2")  # the same URL once resolved: kept once
        yield Follow("/elsewhere")
        yield Follow("mailto:shop@example.com")
        yield Follow("javascript:void(0)")
        yield Media("../img/a.png", kind="image")
        yield Media("ftp://files.example.com/a.zip")
        yield Media("//cdn.example.com/b.pdf")
        yield {"n": 2}


class Failing(Spider):
    name = "failing"

    @route(r"/boom")
    def boom(self, response):
        yield {"n": 1}
        yield Follow("/somewhere")
        raise ValueError("no price on page")

    @route(r"/wrong")
    def wrong(self, response):
        yield "not an item"


def handler_names(spider: Spider, url: str) -> list[str]:
    return [item["handler"] for item in run_spider(spider, html_response(url)).items]


def test_it_routes_to_the_first_route_whose_regex_searches_the_url():
    assert handler_names(Routed(), f"{SHOP}/items/42") == ["item"]
    assert handler_names(Routed(), f"{SHOP}/items/new") == ["listing"]


def test_it_sends_urls_no_route_matches_to_default():
    assert handler_names(Routed(), f"{SHOP}/about") == ["default"]


def test_it_returns_an_empty_result_without_a_matching_route_or_default():
    assert run_spider(Mixed(), html_response(f"{SHOP}/about")) == SpiderResult()


def test_it_tries_a_subclass_routes_before_inherited_ones():
    class Special(Routed):
        @route(r"/items/new")
        def new_item(self, response):
            return [{"handler": "new"}]

    assert handler_names(Special(), f"{SHOP}/items/new") == ["new"]
    assert handler_names(Special(), f"{SHOP}/items/7") == ["item"]


def test_it_collects_items_follows_and_media_resolving_relative_urls_and_dropping_non_http():
    result = run_spider(Mixed(), html_response(f"{SHOP}/shop/page"))
    assert result.items == [{"n": 1}, {"n": 2}]
    assert result.follow == [f"{SHOP}/shop/next?p=2", f"{SHOP}/elsewhere"]
    assert result.media == [(f"{SHOP}/img/a.png", "image"), ("https://cdn.example.com/b.pdf", "file")]
    assert result.error == ""


def test_it_accepts_a_spider_result_and_normalises_its_urls():
    class Direct(Spider):
        name = "direct"

        @route(r".")
        def page(self, response):
            return SpiderResult(items=[{"a": 1}], follow=["/x", "data:,"], media=[("y.mp4", "video")])

    result = run_spider(Direct(), html_response(f"{SHOP}/d/"))
    assert result == SpiderResult(items=[{"a": 1}], follow=[f"{SHOP}/x"], media=[(f"{SHOP}/d/y.mp4", "video")])


def test_it_turns_a_handler_exception_into_an_error_and_discards_what_was_collected():
    result = run_spider(Failing(), html_response(f"{SHOP}/boom"))
    assert result == SpiderResult(error="spider_error: ValueError: no price on page")


def test_it_reports_a_value_that_is_not_an_item_follow_or_media_as_an_error():
    result = run_spider(Failing(), html_response(f"{SHOP}/wrong"))
    assert result.error == "spider_error: TypeError: a handler may yield dict, Follow or Media, not str"
    assert result.items == []


def test_it_registers_and_returns_a_fresh_instance_by_name(registry):
    assert register(Routed) is Routed
    spider = get_spider("routed")
    assert isinstance(spider, Routed)
    assert spider is not get_spider("routed")
    assert spider_names() == ["routed"]


def test_it_works_as_a_class_decorator(registry):
    @register
    class Decorated(Spider):
        name = "decorated"

    assert spider_names() == ["decorated"]
    assert isinstance(get_spider("decorated"), Decorated)


def test_it_refuses_an_unknown_name_listing_the_registered_ones(registry):
    register(Routed)
    with pytest.raises(SpiderError, match=r"unknown spider 'nope' \(registered: routed\)"):
        get_spider("nope")


def test_it_refuses_a_second_class_under_a_taken_name_and_a_class_without_a_name(registry):
    register(Routed)

    class Impostor(Spider):
        name = "routed"

    with pytest.raises(SpiderError, match="taken"):
        register(Impostor)
    with pytest.raises(SpiderError, match="has no name"):
        register(type("Nameless", (Spider,), {}))


def test_it_loads_spider_modules_by_dotted_path():
    load_spider_modules(["scrape.example_spiders"])
    assert "example-shop" in spider_names()
    assert isinstance(get_spider("example-shop"), ExampleShopSpider)


def test_it_names_a_spider_module_that_does_not_exist():
    with pytest.raises(SpiderError, match=r"cannot import spider module 'scrape\.no_such_spiders'"):
        load_spider_modules(["scrape.no_such_spiders"])


def test_it_names_a_spider_module_that_fails_while_importing(tmp_path, monkeypatch):
    (tmp_path / "broken_spiders_for_test.py").write_text("raise RuntimeError('missing API key')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SpiderError, match="'broken_spiders_for_test': RuntimeError: missing API key"):
        load_spider_modules(["broken_spiders_for_test"])


def test_it_decodes_text_with_the_header_charset_else_utf8_with_replacement():
    latin = Response(url=SHOP, status=200, headers={"content-type": "text/plain; charset=ISO-8859-1"}, body=b"caf\xe9")
    assert latin.text == "café"
    assert Response(url=SHOP, status=200, headers={}, body=b"caf\xe9").text == "caf\ufffd"
    assert Response(url=SHOP, status=200, headers={}, body=b'{"a": [1]}').json() == {"a": [1]}


def test_it_parses_html_lazily_and_has_no_document_for_other_bodies():
    page = html_response(f"{SHOP}/p/", b"<html><body><a href='x'>X</a></body></html>")
    assert page.xpath("//a/@href") == ["x"]
    assert page.urljoin("x") == f"{SHOP}/p/x"
    image = Response(url=SHOP, status=200, headers={"Content-Type": "image/png"}, body=b"\x89PNG")
    assert image.doc is None
    assert image.xpath("//a") == []


def test_it_selects_elements_with_css():
    page = html_response(f"{SHOP}/category/lamps", CATEGORY_PAGE)
    assert [a.get("href") for a in page.css("li a.product")] == [
        "/product/anglepoise",
        "/product/anglepoise",
        "https://shop.example.com/product/banker#reviews",
    ]
    assert Response(url=SHOP, status=200, headers={"Content-Type": "text/plain"}, body=b"a").css("a") == []


def test_it_explains_that_css_needs_cssselect_when_it_is_missing(monkeypatch):
    spiders._css_selector.cache_clear()
    monkeypatch.setitem(sys.modules, "lxml.cssselect", None)  # makes the import fail
    with pytest.raises(SpiderError, match="needs the cssselect package"):
        html_response(SHOP).css("p.not-cached-yet")


def test_it_follows_each_product_of_a_category_page_and_counts_them():
    result = run_spider(ExampleShopSpider(), html_response(f"{SHOP}/category/lamps", CATEGORY_PAGE))
    assert result.follow == [f"{SHOP}/product/anglepoise", f"{SHOP}/product/banker"]
    assert result.items == [{"kind": "category", "name": "Desk lamps", "products": 2}]
    assert result.media == []
    assert result.error == ""


def test_it_reads_title_price_and_image_of_a_product_page():
    result = run_spider(ExampleShopSpider(), html_response(f"{SHOP}/product/anglepoise", PRODUCT_PAGE))
    assert result.items == [{"kind": "product", "title": "Anglepoise Type 75 – black", "price": 1299.5}]
    assert result.media == [(f"{SHOP}/product/images/anglepoise.jpg", "image")]
    assert result.follow == []


def test_it_gives_a_product_page_without_a_price_a_none_price():
    page = html_response(f"{SHOP}/product/x", b"<html><body><h1>X</h1></body></html>")
    assert run_spider(ExampleShopSpider(), page).items == [{"kind": "product", "title": "X", "price": None}]


def test_it_carries_a_follow_priority_for_the_frontier():
    class Urgent(Spider):
        name = "urgent"

        def default(self, response):
            yield Follow("/news", priority=10)
            yield Follow("/archive")

    result = run_spider(Urgent(), html_response(f"{SHOP}/"))
    assert result.follow == [f"{SHOP}/news", f"{SHOP}/archive"]
    assert result.priorities == {f"{SHOP}/news": 10}
