"""scrape.spider_code: spider source compiled as data, or refused with its line. Pure: no database."""

import sys
from pathlib import Path

import pytest

from scrape import spiders
from scrape.spider_code import SpiderCodeError, compile_spider, source_sha256, spider_class_for
from scrape.spiders import Response, run_spider

EXAMPLES = (Path(__file__).parents[2] / "scrape" / "example_spiders.py").read_text()
SHOP_SOURCE = """
import logging

from scrape.spiders import Request, Spider, register, route

log = logging.getLogger(__name__)


@register
class Shop(Spider):
    name = "example-shop"  # the built-in spider's name: a version may share it

    @route(r"/product/")
    def product(self, response):
        log.info("product %s", response.url)
        yield {"title": response.xpath("string(//h1)")}
        yield Request("/api/stock", method="POST", json={"id": 7}, route="stock")

    def stock(self, response):
        yield {"stock": response.json()["stock"]}
"""


def refusal(source: str) -> SpiderCodeError:
    with pytest.raises(SpiderCodeError) as caught:
        compile_spider(source)
    return caught.value


def test_it_compiles_a_spider_that_runs_and_logs_as_its_own_module():
    spiders.load_spider_modules(["scrape.example_spiders"])
    shop = compile_spider(SHOP_SOURCE)
    result = run_spider(
        shop(), Response("https://s.test/product/1", 200, {"content-type": "text/html"}, b"<h1>Lamp</h1>")
    )
    assert result.items == [{"title": "Lamp"}]
    assert [r.route for r in result.requests] == ["stock"]
    assert [line.message for line in result.log] == ["product https://s.test/product/1"]
    assert spiders.get_spider("example-shop").__class__.__module__ == "scrape.example_spiders", "registry untouched"
    assert shop.__module__ not in sys.modules


def test_it_refuses_a_syntax_error_with_its_line():
    error = refusal("from scrape.spiders import Spider\n\nclass A(Spider):\n    def x(self)\n        pass\n")
    assert error.line == 4
    assert "line 4" in str(error) and "syntax error" in str(error)


def test_it_refuses_an_exception_at_import_with_the_line_of_the_source():
    error = refusal(
        "from scrape.spiders import Spider, route\n\nclass A(Spider):\n    @route('(')\n    def x(self, _): ..."
    )
    assert error.line == 4
    assert "line 4" in str(error) and "re.error" in str(error)


def test_it_refuses_code_without_a_spider():
    assert "defines no spider" in str(refusal("import re\nX = 1\n"))


def test_it_refuses_several_spiders_unless_one_is_registered():
    assert "defines 2 spiders" in str(refusal(EXAMPLES.replace("from .spiders", "from scrape.spiders")))
    one = EXAMPLES.replace("from .spiders", "from scrape.spiders").replace(
        "@register\nclass ExampleApi", "class ExampleApi"
    )
    assert compile_spider(one).name == "example-shop"


def test_it_refuses_a_route_that_names_no_handler_with_its_line():
    error = refusal(SHOP_SOURCE.replace('route="stock"', 'route="stok"'))
    assert error.line == 17
    assert "route 'stok' is not a handler method of Shop" in str(error)
    error = refusal(SHOP_SOURCE.replace('route="stock"', "route=self.stok"))
    assert error.line == 17


def test_a_class_is_compiled_once_per_hash():
    sha = source_sha256(SHOP_SOURCE)
    assert spider_class_for(sha, SHOP_SOURCE) is spider_class_for(sha, SHOP_SOURCE)
    with pytest.raises(SpiderCodeError):
        spider_class_for("0" * 64, SHOP_SOURCE)
