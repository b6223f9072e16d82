"""scrape.rules: declarative extraction rules run on saved HTML. Pure: no database, no network."""

import copy
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scrape.rules import CompiledRules, RuleError, RuleResult, compile_rules, rules_version

FIXTURES = Path(__file__).parents[1] / "fixtures" / "rules"
LISTING_URL = "https://shop.example.com/category/widgets?page=1"
PRODUCT_RULES = {
    "name": "products",
    "url_patterns": [r"/category/"],
    "item_selector": "div.product",
    "fields": {
        "title": {"css": "h2.name"},
        "price": {"css": ".price", "regex": r"([0-9.]+)", "type": "float"},
        "in_stock": {"css": ".stock", "attr": "data-in-stock", "type": "bool"},
        "rating": {"css": ".rating", "type": "int"},
        "tags": {"xpath": ".//li[@class='tag']/text()", "many": True},
        "link": {"css": "a.more", "attr": "href", "absolute": True},
    },
    "required": ["title", "price"],
    "follow": ["/category/"],
    "deny": ["/logout"],
}
ID_RULES = {"id_regex": r"item-(\d+)", "download_url_fmt": "https://cdn.example.com/files/{id}.zip"}


def page(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def run(spec: dict, name: str, url: str = LISTING_URL) -> RuleResult:
    return compile_rules(spec).extract(page(name), url)


@pytest.fixture(scope="module")
def listing() -> RuleResult:
    return run(PRODUCT_RULES, "products.html")


def test_it_extracts_one_item_per_product_with_every_field(listing):
    assert listing.items[:2] == [
        {
            "title": "Blue Widget",
            "price": 19.99,
            "in_stock": True,
            "rating": 4,
            "tags": ["small", "blue"],
            "link": "https://shop.example.com/product/101",
        },
        {
            "title": "Red Widget",
            "price": 5.0,
            "in_stock": False,
            "rating": 3,
            "tags": ["red"],
            "link": "https://shop.example.com/product/102?ref=list",
        },
    ]
    assert listing.errors[:2] == [[], []]


def test_it_keeps_an_item_missing_a_required_field_and_says_why(listing):
    assert listing.items[2] == {
        "title": "Green Widget",
        "price": None,
        "in_stock": True,
        "rating": None,
        "tags": [],
        "link": "https://shop.example.com/product/103",
    }
    assert listing.errors[2] == ["missing required field price"]


def test_it_reports_values_that_do_not_convert_per_field(listing):
    assert listing.items[3]["title"] == "Gold Widget"
    assert listing.items[3]["price"] is None
    assert listing.errors[3] == [
        "price: cannot convert '1.2.3' to float",
        "in_stock: cannot convert 'maybe' to bool",
        "rating: cannot convert 'five' to int",
    ]


def test_it_follows_only_matching_links_that_are_not_denied(listing):
    assert listing.follow == [
        "https://shop.example.com/category/gadgets",
        "https://shop.example.com/category/widgets?page=2",
        "https://partner.example.org/category/deals",
    ]


def test_it_follows_every_http_link_not_denied_without_follow_patterns():
    result = run({"deny": ["/logout"]}, "products.html")
    assert result.follow == [
        "https://shop.example.com/",
        "https://shop.example.com/category/gadgets",
        "https://shop.example.com/category/widgets?page=2",
        "https://partner.example.org/category/deals",
        "https://shop.example.com/product/101",
        "https://shop.example.com/product/102?ref=list",
        "https://shop.example.com/product/103",
        "https://shop.example.com/product/104",
    ]
    assert result.items == []
    assert result.downloads == []


def test_it_makes_one_item_per_page_without_an_item_selector():
    spec = {
        "fields": {
            "title": {"xpath": "//h1"},
            "first_paragraph": {"css": "p"},
            "description": {"xpath": "//meta[@name='description']/@content"},
            "price": {"xpath": "translate(//div[@class='price']/strong, ',', '')", "type": "int"},
            "photo_count": {"xpath": "count(//img)", "type": "int"},
            "has_photos": {"xpath": "boolean(//img)", "type": "bool"},
            "photos": {"css": "img.photo", "attr": "src", "absolute": True, "many": True},
            "body": {"css": "div.body", "attr": "html"},
            "manual": {"css": "div.body a", "attr": "href", "absolute": True, "regex": r"/docs/(\w+)\.pdf$"},
            "published": {"css": ".published", "attr": "data-on", "type": "bool"},
            "sku": {"css": ".sku"},
            "reviews": {"css": ".review", "many": True},
        },
        "required": ["title", "sku"],
    }
    result = run(spec, "article.html", "https://shop.example.com/product/42")
    assert result.items == [
        {
            "title": "Widget Forty-Two",
            "first_paragraph": "First paragraph.",
            "description": "A very fine widget.",
            "price": 1299,
            "photo_count": 3,
            "has_photos": True,
            "photos": ["https://shop.example.com/img/42-a.jpg", "https://cdn.example.com/42-b.jpg"],
            "body": '<div class="body"><p>First paragraph.</p>'
            '<p>Second <a href="/docs/manual.pdf">manual</a>.</p></div>',
            "manual": "manual",
            "published": True,
            "sku": None,
            "reviews": [],
        }
    ]
    assert result.errors == [["missing required field sku"]]


def test_it_uses_the_whole_match_when_the_regex_has_no_group_and_group_one_when_it_has_several():
    spec = {
        "fields": {
            "whole": {"css": ".price", "regex": r"[\d,]+ USD"},
            "first_group": {"css": ".price", "regex": r"(\d),(\d+)"},
            "unmatched": {"css": ".price", "regex": r"EUR (\d+)"},
        }
    }
    [item] = run(spec, "article.html").items
    assert item == {"whole": "1,299 USD", "first_group": "1", "unmatched": None}


def test_it_turns_ids_into_deduplicated_download_urls_in_order_of_first_appearance():
    result = run(ID_RULES, "downloads.html", "https://files.example.net/archive/index.html")
    assert result.downloads == [
        "https://cdn.example.com/files/7.zip",
        "https://cdn.example.com/files/12.zip",
        "https://cdn.example.com/files/31.zip",
        "https://cdn.example.com/files/45.zip",
    ]


def test_it_resolves_a_relative_download_format_against_the_base_href_and_quotes_ids():
    spec = {"id_regex": r"file=([\w-]+)|code: (\S+)", "download_url_fmt": "dl/{id}?v=1"}
    html = '<a href="x?file=item-12">a</a> <p>code: a?b#c</p> <a href="y?file=item-12">again</a>'
    result = compile_rules(spec).extract(f"<base href='https://files.example.net/archive/'>{html}", "https://a.test/")
    assert result.downloads == ["https://files.example.net/archive/dl/item-12?v=1"]
    spec["id_regex"] = r"code: (\S+)"
    result = compile_rules(spec).extract(html, "https://a.test/p/")
    assert result.downloads == ["https://a.test/p/dl/a%3Fb%23c?v=1"]


def test_it_applies_only_to_pages_matching_a_url_pattern():
    rules = compile_rules({"url_patterns": [r"/product/\d+", r"^https://shop\.example\.com/deals"]})
    assert rules.applies_to("https://shop.example.com/product/42")
    assert rules.applies_to("https://shop.example.com/deals?page=3")
    assert not rules.applies_to("https://shop.example.com/product/new")
    assert not rules.applies_to("https://other.example.com/deals")
    assert compile_rules({}).applies_to("https://anything.example/")


def test_it_accepts_the_documented_example_rule_set():
    spec = copy.deepcopy(PRODUCT_RULES) | ID_RULES
    rules = compile_rules(spec)
    assert isinstance(rules, CompiledRules)
    assert rules.name == "products"
    assert [field.name for field in rules.fields] == ["title", "price", "in_stock", "rating", "tags", "link"]
    assert rules.extract(page("products.html"), LISTING_URL).rules_version == rules.version == rules_version(spec)


INVALID_RULES = [
    ([], "rules: must be an object, not list"),
    ({"folow": ["/a"]}, "rules: unknown key 'folow'"),
    ({"name": 3}, "name: must be a non-empty string"),
    ({"fields": ["title"]}, "fields: must be an object"),
    ({"fields": {"title": "h1"}}, "fields.title: must be an object, not str"),
    ({"fields": {"title": {}}}, "fields.title: give exactly one of css or xpath"),
    ({"fields": {"title": {"css": "h1", "xpath": "//h1"}}}, "fields.title: give exactly one of css or xpath"),
    ({"fields": {"title": {"css": "h1", "selector": "x"}}}, "fields.title: unknown key 'selector'"),
    ({"fields": {"title": {"css": ""}}}, "fields.title.css: must be a non-empty string"),
    ({"fields": {"title": {"css": "div["}}}, "fields.title.css: invalid CSS selector 'div['"),
    ({"fields": {"title": {"css": "h2::text"}}}, "fields.title.css: invalid CSS selector 'h2::text'"),
    ({"fields": {"title": {"xpath": "//div["}}}, "fields.title.xpath: invalid XPath '//div['"),
    ({"fields": {"title": {"xpath": "shout(//h1)"}}}, "fields.title.xpath: invalid XPath 'shout(//h1)'"),
    ({"fields": {"title": {"xpath": "$x"}}}, "fields.title.xpath: invalid XPath '$x'"),
    ({"fields": {"p": {"css": ".p", "regex": "([0-9"}}}, "fields.p.regex: invalid regular expression '([0-9'"),
    ({"fields": {"p": {"css": ".p", "type": "decimal"}}}, "fields.p.type: 'decimal' is not one of str, int, float"),
    ({"fields": {"p": {"css": ".p", "many": "yes"}}}, "fields.p.many: must be true or false"),
    ({"fields": {"p": {"css": ".p", "absolute": 1}}}, "fields.p.absolute: must be true or false"),
    ({"fields": {"p": {"css": ".p", "attr": ""}}}, "fields.p.attr: must be a non-empty string"),
    ({"fields": {"": {"css": ".p"}}}, "fields.: a field name must be a non-empty string"),
    ({"fields": {"p": {"css": ".p"}}, "required": ["price"]}, "required: 'price' is not one of the fields"),
    ({"required": "title"}, "required: must be a list of strings, not str"),
    ({"item_selector": "div.product >"}, "item_selector: invalid CSS selector"),
    ({"url_patterns": "/product/"}, "url_patterns: must be a list of strings"),
    ({"url_patterns": ["/product/(\\d+"]}, "url_patterns[0]: invalid regular expression"),
    ({"follow": ["ok", "*bad"]}, "follow[1]: invalid regular expression '*bad'"),
    ({"deny": [None]}, "deny[0]: must be a non-empty string"),
    ({"id_regex": "item-(\\d+)"}, "id_regex and download_url_fmt: give both or neither"),
    ({"download_url_fmt": "https://x.test/{id}"}, "id_regex and download_url_fmt: give both or neither"),
    ({"id_regex": "(", "download_url_fmt": "https://x.test/{id}"}, "id_regex: invalid regular expression"),
    ({"id_regex": "i", "download_url_fmt": "https://x.test/file"}, "download_url_fmt: must contain the {id}"),
    ({"id_regex": "i", "download_url_fmt": "https://x.test/{name}/{id}"}, "unknown placeholder {name}"),
    ({"id_regex": "i", "download_url_fmt": "https://x.test/{}/{id}"}, "unknown placeholder {}"),
    ({"id_regex": "i", "download_url_fmt": "https://x.test/{id.real}"}, "unknown placeholder {id.real}"),
    ({"id_regex": "i", "download_url_fmt": "https://x.test/{id"}, "download_url_fmt: invalid format"),
    ({"id_regex": "i", "download_url_fmt": "https://x.test/{id:d}"}, "download_url_fmt: invalid format"),
    ({"name": "n", "fields": {"p": {"css": ".p", "regex": float("nan")}}}, "fields.p.regex: must be a non-empty"),
]


@pytest.mark.parametrize(("spec", "message"), INVALID_RULES)
def test_it_rejects_an_invalid_rule_with_a_message_naming_the_problem(spec, message):
    with pytest.raises(RuleError) as raised:
        compile_rules(spec)
    assert message in str(raised.value)
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    "html",
    [b"", b"   \n", "", b"\x00\xff\xfe garbage", b"<div><p><b>unclosed", b"<div>" * 50_000 + b"<h2 class=name>deep"],
)
def test_it_survives_empty_malformed_and_deeply_nested_pages(html):
    result = compile_rules(PRODUCT_RULES).extract(html, LISTING_URL)
    assert result.follow == []
    assert len(result.items) == len(result.errors)
    page_rules = {k: v for k, v in PRODUCT_RULES.items() if k != "item_selector"}
    [errors] = compile_rules(page_rules).extract(html, LISTING_URL).errors
    assert "missing required field price" in errors


def test_it_reads_text_and_bytes_alike_and_ignores_an_encoding_declaration_in_text():
    html = page("products.html")
    rules = compile_rules(PRODUCT_RULES)
    assert rules.extract(html.decode("utf-8"), LISTING_URL) == rules.extract(html, LISTING_URL)
    declared = '<?xml version="1.0" encoding="latin-1"?><div class="product"><h2 class="name">Café</h2></div>'
    assert rules.extract(declared, LISTING_URL).items[0]["title"] == "Café"


TAGS = [
    '<div class="product">',
    "</div>",
    '<h2 class="name">',
    '<span class="price">',
    '<a class="more" href="',
    '">',
    '<li class="tag">',
    "item-42",
    "/category/x",
    "<!--",
    "<![CDATA[",
    "&amp;",
    "\x00",
]
html_like = st.lists(st.one_of(st.sampled_from(TAGS), st.text(max_size=20)), max_size=40).map("".join)


@given(html=st.one_of(st.text(), st.binary(), html_like), url=st.one_of(st.just(LISTING_URL), st.text(max_size=30)))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_it_never_raises_on_arbitrary_input(html, url):
    result = compile_rules(PRODUCT_RULES | ID_RULES).extract(html, url)
    assert len(result.items) == len(result.errors)
    assert all(link.startswith(("http://", "https://")) for link in result.follow + result.downloads)


def test_it_versions_rules_stably_across_key_order():
    reordered = {key: PRODUCT_RULES[key] for key in reversed(PRODUCT_RULES)}
    fields = PRODUCT_RULES["fields"]
    reordered["fields"] = {name: dict(reversed(fields[name].items())) for name in reversed(fields)}
    version = rules_version(PRODUCT_RULES)
    assert len(version) == 12
    assert int(version, 16) >= 0
    assert rules_version(reordered) == version
    assert compile_rules(reordered).version == version


def test_it_versions_rules_differently_when_a_selector_changes():
    changed = copy.deepcopy(PRODUCT_RULES)
    changed["fields"]["title"]["css"] = "h3.name"
    assert rules_version(changed) != rules_version(PRODUCT_RULES)


def test_it_rejects_rules_that_are_not_json_compatible():
    with pytest.raises(RuleError, match="not JSON-compatible"):
        rules_version({"fields": {"title": {"css": {"h1"}}}})


def test_it_extracts_every_item_of_a_large_listing():
    body = page("products.html")
    products = body[body.index(b"<main>") + 6 : body.index(b"</main>")]
    result = compile_rules(PRODUCT_RULES | ID_RULES).extract(body.replace(products, products * 500), LISTING_URL)
    assert len(result.items) == 2000
    assert result.errors[1002] == ["missing required field price"]
    assert result.downloads == []


def test_it_takes_a_priority_for_the_links_a_rule_set_follows():
    assert compile_rules({"follow": ["/news/"], "priority": 5}).priority == 5
    assert compile_rules({}).priority == 0
    for bad in (1.5, "high", True, 5000):
        with pytest.raises(RuleError, match="priority"):
            compile_rules({"priority": bad})


def test_a_rule_set_with_required_fields_still_names_its_items_after_itself():
    rules = compile_rules(
        {"fields": {"title": {"css": "h1"}, "price": {"css": ".p"}}, "required": ["price"]}, name="shop"
    )
    assert rules.kind == "rule:shop"
