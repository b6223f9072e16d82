"""Block detection's rules (core/blocks.py), on answers made here: no database, no network."""

import pytest

from bench.sitegen import page_html, site_plan
from core.blocks import block_rules, block_verdict, rules_problems, title_of
from core.net.client import FetchResponse

HTML = {"content-type": "text/html; charset=utf-8"}
BUILT_IN = block_rules([])


def answer(body: str | bytes, status: int = 200, headers: dict | None = None) -> FetchResponse:
    data = body.encode() if isinstance(body, str) else body
    return FetchResponse(url="http://site.test/p", status_code=status, headers=headers or HTML, body=data)


def page(title: str, text: str = "") -> str:
    return f"<html><head><title>{title}</title></head><body>{text}</body></html>"


CLOUDFLARE = (
    '<!DOCTYPE html><html><head><title>Just a moment...</title></head><body><div id="cf-wrapper">'
    "<script>(function(){window._cf_chl_opt={cvId: '3',cZone: 'site.test',cType: 'managed'};}());</script>"
    '<script src="/cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1"></script></div></body></html>'
)
AKAMAI = (
    "<HTML><HEAD><TITLE>Access Denied</TITLE></HEAD><BODY><H1>Access Denied</H1>You don't have permission "
    "to access this server.<P>Reference&#32;&#35;18.5e1c2f17<P>https&#58;&#47;&#47;errors&#46;edgesuite&#46;"
    "net&#47;18.5e1c2f17</BODY></HTML>"
)


@pytest.mark.parametrize(
    ("body", "status", "rule"),
    [
        (CLOUDFLARE, 403, "challenge"),
        (CLOUDFLARE, 503, "challenge"),
        (AKAMAI, 403, "challenge"),
        (AKAMAI.replace("&#46;", "."), 403, "challenge"),
        (page("Are you a robot?", '<div class="g-recaptcha"></div>'), 200, "block title"),
        (page("Access Denied", "Your request was refused."), 200, "block title"),
        (page("Shop", "<p>To continue, please verify you are human.</p>"), 200, "captcha"),
        (page("Error", "<p>Request unsuccessful. Incapsula incident ID: 1-2-3</p>"), 200, "challenge"),
        (page("Amazon.com", "<h4>Enter the characters you see below</h4>"), 200, "captcha"),
    ],
)
def test_it_classes_the_common_block_pages_as_blocked(body, status, rule):
    found = block_verdict(BUILT_IN, answer(body, status))
    assert found is not None and found.rule == rule, found


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (page("Access Denied", "This folder is private."), 403),  # an ordinary refusal: its page fails
        (page("CAPTCHA - Wikipedia", "<p>A CAPTCHA is a test. Are you a robot?</p>" + "x" * 40_000), 200),
        (page("Login", '<form><div class="g-recaptcha"></div></form>'), 200),
        (page("Shop", '<script src="/cdn-cgi/challenge-platform/scripts/jsd/main.js"></script>'), 200),
        (page("Shop", '<script src="/_Incapsula_Resource?SWJIYLWA=719d34d3"></script>'), 200),
        (page("Products", "<p>Fresh tomatoes</p>"), 200),
    ],
)
def test_it_leaves_ordinary_pages_alone(body, status):
    assert block_verdict(BUILT_IN, answer(body, status)) is None


def test_it_judges_no_redirect_no_304_and_no_failed_fetch():
    for response in (
        answer(CLOUDFLARE, 302, HTML | {"location": "/x"}),
        answer(b"", 304),
        FetchResponse(url="http://site.test/", error_code="connect_error"),
    ):
        assert block_verdict(BUILT_IN, response) is None


def test_the_built_in_rules_look_at_text_only_and_can_be_turned_off():
    assert block_verdict(BUILT_IN, answer(CLOUDFLARE, headers={"content-type": "image/png"})) is None
    assert block_verdict(block_rules([], built_in=False), answer(CLOUDFLARE, 403)) is None


def test_a_users_rule_holds_when_all_its_conditions_hold():
    rules = block_rules([{"name": "soft limit", "status": [200, 202], "regex": "(?i)rate limit(ed)?"}], built_in=False)
    found = block_verdict(rules, answer(page("Shop", "You are rate limited")))
    assert found.rule == "soft limit" and "status 200" in found.reason and "rate limit" in found.reason
    assert block_verdict(rules, answer(page("Shop", "You are rate limited"), 404)) is None
    assert block_verdict(rules, answer(page("Shop", "Fresh tomatoes"))) is None


def test_a_title_rule_a_status_rule_and_an_unnamed_rule():
    rules = block_rules([{"title": "^Sorry"}, {"status": 451, "name": "legal"}], built_in=False)
    assert block_verdict(rules, answer(page("Sorry, one moment"))).rule == "rule 1"
    assert block_verdict(rules, answer(page("Not Sorry"))) is None
    assert block_verdict(rules, answer(page("Shop"), 451)).rule == "legal"


def test_a_selector_rule_finds_an_element_or_misses_one():
    rules = block_rules([{"name": "login wall", "selector": "form#login"}], built_in=False)
    assert block_verdict(rules, answer(page("Shop", '<form id="login"></form>'))).rule == "login wall"
    assert block_verdict(rules, answer(page("Shop", "<p>tomatoes</p>"))) is None
    missing = block_rules([{"selector": "div.price", "absent": True}], built_in=False)
    assert block_verdict(missing, answer(page("Shop", "<p>tomatoes</p>"))) is not None
    assert block_verdict(missing, answer(page("Shop", '<div class="price">3</div>'))) is None


def test_a_body_much_shorter_than_the_hosts_usual_one():
    rules = block_rules([{"shorter_than": 0.25}], built_in=False)
    short = answer(page("Shop", "x" * 100))
    found = block_verdict(rules, short, usual_length=4000)
    assert found is not None and "usual 4000" in found.reason
    assert block_verdict(rules, short, usual_length=400) is None
    assert block_verdict(rules, short, usual_length=None) is None  # nothing known of the host yet
    assert rules.wants_usual_length and not BUILT_IN.wants_usual_length


def test_a_regex_rule_reads_only_the_first_scan_bytes():
    rules = block_rules([{"regex": "blocked-marker"}], built_in=False, scan_bytes=1024)
    assert block_verdict(rules, answer("x" * 2000 + "blocked-marker")) is None
    assert block_verdict(rules, answer("x" * 500 + "blocked-marker")) is not None


def test_the_title_is_read_without_parsing():
    assert title_of(b"<html><head><TITLE lang=en>\n  Are you\n a robot?</title>") == "Are you a robot?"
    assert title_of(b"<html><body>no title") == ""
    assert title_of(b"<title>never closed") == ""


@pytest.mark.parametrize(
    ("specs", "problem"),
    [
        ({"title": "x"}, "must be a JSON list"),
        (["captcha"], "must be an object"),
        ([{"name": "nothing"}], "needs at least one of"),
        ([{"colour": "red", "status": 403}], "unknown key 'colour'"),
        ([{"regex": "(a+)+$"}], "catastrophic"),
        ([{"title": "("}], "is not a regular expression"),
        ([{"status": "403"}], "status must be an HTTP status code"),
        ([{"status": [403, 999]}], "status must be an HTTP status code"),
        ([{"selector": "div[["}], "is not a CSS selector"),
        ([{"shorter_than": 2}], "at most 1"),
        ([{"shorter_than": "half"}], "a fraction"),
    ],
)
def test_it_names_what_is_wrong_with_a_rule(specs, problem):
    problems = rules_problems(specs)
    assert any(problem in p for p in problems), problems


def test_valid_rules_have_no_problem():
    specs = [{"name": "a", "status": [403], "regex": "(?i)denied"}, {"selector": "#c", "absent": True}]
    assert rules_problems([*specs, {"shorter_than": 0.3}, {"title": "Sorry"}]) == []


def test_no_page_of_the_bench_site_is_blocked():
    site = site_plan(n=300, seed=7, base_url="http://127.0.0.1")
    bodies = [page_html(spec).encode() for spec in site.pages]
    assert not [b for b in bodies if block_verdict(BUILT_IN, answer(b)) is not None]
