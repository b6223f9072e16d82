"""crawl.robots: robots.txt decisions per RFC 9309. Pure: the response is handed in."""

import pytest

from crawl.robots import MAX_ROBOTS_BYTES, policy_from_response

AGENT = "CrawlHub/1.0 (+https://crawlhub.example/bot)"
OTHER_AGENT = "SomeOtherBot/2.1"

ROBOTS = """\
# a realistic file: groups, wildcards, anchors, precedence, comments
User-agent: *
Disallow: /private/
Allow: /private/press/
Disallow: /*.pdf$
Disallow: /search*q=
Disallow: /tmp
Allow: /tmp
Allow: /shop/cart
Disallow: /shop/
Crawl-delay: 2.5

User-agent: crawlhub
Disallow: /no-crawlhub/
Crawl-delay: 7

Sitemap: https://example.com/sitemap.xml
sitemap: https://example.com/news-sitemap.xml
"""


@pytest.fixture
def policy():
    return policy_from_response(200, ROBOTS)


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/", True),
        ("/articles/1.html", True),
        ("/private/", False),
        ("/private/salaries.html", False),
        ("/private/press/release.html", True),  # the longer Allow beats the shorter Disallow
        ("/docs/plan.pdf", False),
        ("/docs/plan.pdf?download=1", True),  # "$" anchors the end of the path
        ("/docs/plan.pdfx", True),
        ("/search?q=parks", False),
        ("/search/advanced?lang=en&q=parks", False),
        ("/search?lang=en", True),
        ("/tmp/file", True),  # Allow and Disallow equally long: Allow wins
        ("/shop/cart", True),  # Allow listed first and longer
        ("/shop/item/1", False),
    ],
)
def test_it_applies_the_star_group_to_other_agents(policy, path, allowed):
    assert policy.allows("https://example.com" + path, OTHER_AGENT) is allowed


@pytest.mark.parametrize(
    ("path", "allowed"),
    [("/no-crawlhub/x", False), ("/private/salaries.html", True), ("/docs/plan.pdf", True)],
)
def test_it_applies_only_the_most_specific_group_to_our_agent(policy, path, allowed):
    assert policy.allows("https://example.com" + path, AGENT) is allowed


def test_it_matches_the_agent_group_case_insensitively(policy):
    assert not policy.allows("https://example.com/no-crawlhub/x", "CRAWLHUB")
    assert policy.allows("https://example.com/no-crawlhub/x", OTHER_AGENT)


def test_it_reads_the_crawl_delay_of_the_matching_group(policy):
    assert policy.crawl_delay(OTHER_AGENT) == 2.5
    assert policy.crawl_delay(AGENT) == 7


def test_it_has_no_crawl_delay_when_the_file_sets_none():
    assert policy_from_response(200, "User-agent: *\nDisallow: /x\n").crawl_delay(AGENT) is None


def test_it_lists_every_sitemap_line(policy):
    assert policy.sitemaps() == ["https://example.com/sitemap.xml", "https://example.com/news-sitemap.xml"]


def test_it_allows_everything_for_an_empty_or_non_robots_200_body():
    for body in ("", "<html><body>Welcome!</body></html>"):
        policy = policy_from_response(200, body)
        assert policy.allows("https://example.com/anything", AGENT)
        assert policy.sitemaps() == []


def test_it_disallows_everything_under_disallow_slash():
    policy = policy_from_response(200, "User-agent: *\nDisallow: /\n")
    assert not policy.allows("https://example.com/", AGENT)
    assert not policy.allows("https://example.com/a/b?c=d", AGENT)
    assert policy.refusal()[0] == "robots_disallowed"


def test_it_reads_only_the_first_500_kib():
    padding = "# padding\n" * (MAX_ROBOTS_BYTES // 10 + 1)
    policy = policy_from_response(200, "User-agent: *\nDisallow: /early/\n" + padding + "Disallow: /late/\n")
    assert not policy.allows("https://example.com/early/x", AGENT)
    assert policy.allows("https://example.com/late/x", AGENT)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410])
def test_it_allows_everything_when_robots_txt_is_a_4xx(status):
    policy = policy_from_response(status, "User-agent: *\nDisallow: /\n")
    assert policy.allows("https://example.com/private/x", AGENT)
    assert policy.crawl_delay(AGENT) is None
    assert policy.sitemaps() == []


@pytest.mark.parametrize("status", [500, 502, 503])
def test_it_disallows_everything_when_robots_txt_is_a_5xx(status):
    policy = policy_from_response(status, "User-agent: *\nAllow: /\n")
    assert not policy.allows("https://example.com/", AGENT)
    code, message = policy.refusal()
    assert code == "robots_unavailable"
    assert f"HTTP {status}" in message


def test_it_disallows_everything_when_robots_txt_could_not_be_fetched():
    policy = policy_from_response(None, "", error="connect_timeout")
    assert not policy.allows("https://example.com/", AGENT)
    assert policy.refusal()[0] == "connect_timeout"
    assert policy_from_response(None, "").refusal()[0] == "robots_unavailable"


@pytest.mark.parametrize("error", ["connect_error", "connect_timeout", "dns_error"])
def test_a_host_that_did_not_answer_is_called_unreachable_not_blamed_on_robots_txt(error):
    code, message = policy_from_response(None, "", error=error).refusal()
    assert code == error
    assert message.startswith(f"the host was unreachable ({error})")
    assert "robots.txt could not be fetched" not in message


def test_it_reports_a_blocked_address_as_such():
    policy = policy_from_response(None, "", error="blocked_address")
    assert not policy.allows("https://example.com/", AGENT)
    assert policy.refusal()[0] == "blocked_address"


def test_it_refuses_with_robots_disallowed_when_the_rules_say_no(policy):
    assert not policy.allows("https://example.com/private/x", OTHER_AGENT)
    assert policy.refusal()[0] == "robots_disallowed"


@pytest.mark.parametrize("path", ["/~joe/x", "/%7Ejoe/x", "/caf%C3%A9/menu", "/caf\u00e9/menu"])
def test_it_matches_percent_encoded_and_raw_paths_alike(path):
    policy = policy_from_response(200, "User-agent: *\nDisallow: /~joe/\nDisallow: /caf%C3%A9/\n")
    assert not policy.allows("https://example.com" + path, AGENT)
