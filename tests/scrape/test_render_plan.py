"""The render setting of rule sets, spider routes and requests, page actions, and the signs of a
JavaScript shell: pure, no database."""

import pytest

from core.net.page_actions import ActionError, actions_checked
from scrape.render_plan import (
    RoutePlan,
    page_signature,
    planned_request,
    request_plan,
    sample_difference,
    shell_reason,
)
from scrape.rules import RuleError, compile_rules, parse_html
from scrape.spider_request import Request, RequestError
from scrape.spiders import Spider, SpiderError, route

CATEGORY = RoutePlan("auto", "rule:category", ({"action": "scroll"},))
PRODUCT = RoutePlan("never", "rule:product")
TEXT = "<p>" + "Plenty of words a visitor reads without any script at all. " * 5 + "</p>"


def shell(html: str) -> str | None:
    return shell_reason(parse_html(html))


def test_it_sees_an_empty_mount_point_as_a_shell():
    reason = shell(f'<html><body><div id="root"></div>{TEXT}<script src="/app.js"></script></body></html>')
    assert reason == "its mount point <div root> is empty"


def test_it_sees_a_noscript_that_asks_for_javascript():
    html = f"<body>{TEXT}<noscript>You need to enable JavaScript to run this app.</noscript><script></script></body>"
    assert "asks for JavaScript" in shell(html)


def test_scripts_and_next_to_no_text_are_a_shell():
    assert shell("<body><h1>Shop</h1><script>start()</script></body>") == (
        "scripts and only 4 characters of visible text"
    )


def test_a_page_with_its_text_or_without_scripts_is_not_a_shell():
    assert shell(f'<body><div id="app"><p>served</p></div>{TEXT}<script></script></body>') is None
    assert shell('<body><div id="root"></div></body>') is None, "no script: nothing would fill it"


def test_a_rendered_sample_with_more_links_or_other_fields_differs():
    plain = page_signature(["http://s/a"], [("rule:p", {"name": "x"})])
    more = page_signature(["http://s/a", "http://s/b", "http://s/c"], [("rule:p", {"name": "x"})])
    other = page_signature(["http://s/a"], [("rule:p", {"name": "y"})])
    assert sample_difference(plain, more) == "a rendered sample found 2 links the plain page lacks (3 links against 1)"
    assert sample_difference(plain, other) == "a rendered sample's watched fields differ from the plain page's"
    assert sample_difference(plain, page_signature(["http://s/a"], [("rule:p", {"name": "x"})])) is None
    assert sample_difference(more, plain) is None, "fewer links: a browser would not help"


def test_the_strongest_route_decides_unless_the_request_chose():
    assert request_plan({}, [PRODUCT, CATEGORY]) == CATEGORY
    assert request_plan({}, [None]) is None
    assert request_plan({"render": False}, [CATEGORY]) is None, "Request(render=False) stays plain"
    assert request_plan({"render": False, "render_auto": ""}, [PRODUCT]).route == "rule:product"
    assert request_plan({"render": False, "render_auto": ""}, []).route == "request"


def test_the_row_carries_the_choice_and_the_actions():
    assert planned_request({}, CATEGORY, "sampling") == {
        "render": False,
        "render_auto": "rule:category",
        "actions": [{"action": "scroll"}],
    }
    assert planned_request({}, CATEGORY, "render")["render"] is True
    assert planned_request({}, PRODUCT, "") == {"render": False}


def test_a_rule_set_says_how_its_pages_are_fetched():
    rules = compile_rules({"render": "auto", "actions": [{"action": "wait_for", "selector": ".x"}]}, name="cat")
    assert rules.render_plan == RoutePlan("auto", "rule:cat", ({"action": "wait_for", "selector": ".x"},))
    assert compile_rules({}, name="plain").render_plan is None
    with pytest.raises(RuleError, match="render must be one of never, always, auto"):
        compile_rules({"render": "sometimes"})
    with pytest.raises(RuleError, match=r"actions\[0\]: unknown key 'times' for scroll"):
        compile_rules({"render": "always", "actions": [{"action": "scroll", "times": 3}]})


def test_a_spider_route_says_how_its_pages_are_fetched():
    class Shop(Spider):
        name = "render-plan-shop"

        @route(r"/category/", render="auto", actions=[{"action": "click", "selector": "#more"}])
        def category(self, response):
            return []

        @route(r"/product/")
        def product(self, response):
            return []

    shop = Shop()
    assert shop.sets_render
    assert shop.render_plan("http://s/category/1") == RoutePlan(
        "auto", "spider:category", ({"action": "click", "selector": "#more"},)
    )
    assert shop.render_plan("http://s/product/1") is None
    assert shop.render_plan("http://s/x", "category").route == "spider:category"
    with pytest.raises(SpiderError, match="render must be one of"):
        route(r"/x", render="maybe")


def test_a_request_shares_the_setting():
    assert Request("http://s/", render="always").page_request() == {"render": True}
    assert Request("http://s/", render=False).page_request() == {"render": False}
    auto = Request("http://s/", render="auto", actions=[{"action": "scroll", "max": 5}]).page_request()
    assert auto == {"render": False, "render_auto": "", "actions": [{"action": "scroll", "max": 5}]}
    assert Request.from_page_request("http://s/", auto).render == "auto"
    with pytest.raises(RequestError, match="render must be True, False, one of never, always, auto"):
        Request("http://s/", render="yes")


@pytest.mark.parametrize(
    ("actions", "problem"),
    [
        ({"action": "scroll"}, "must be a list"),
        ([{"action": "hover"}], r"actions\[0\]: needs an action"),
        ([{"action": "click"}], "click needs a non-empty selector"),
        ([{"action": "scroll", "max": 0}], "max must be a whole number from 1 to 100"),
        ([{"action": "script", "source": "x" * 10_001}], "longer than 10000"),
    ],
)
def test_page_actions_are_checked(actions, problem):
    with pytest.raises(ActionError, match=problem):
        actions_checked(actions)
