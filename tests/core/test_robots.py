"""core.robots: robots.txt decisions per RFC 9309. Pure: the response is handed in."""

import pytest

from core.robots import MAX_ROBOTS_BYTES, policy_from_response, robots_text

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


def test_it_resolves_relative_sitemap_lines_against_the_robots_txt_url():
    body = (
        "Sitemap: /sitemap.xml\nSitemap: //cdn.example.net/s.xml\nSitemap: news.xml\nSitemap: https://a.example/x.xml\n"
    )
    policy = policy_from_response(200, body)
    assert policy.sitemaps("https://example.com/robots.txt") == [
        "https://example.com/sitemap.xml",
        "https://cdn.example.net/s.xml",
        "https://example.com/news.xml",
        "https://a.example/x.xml",
    ]


def test_it_skips_sitemap_lines_that_could_not_be_decoded_or_are_not_http():
    raw = b"Sitemap: https://example.com/caf\xe9.xml\nSitemap: ftp://example.com/s.xml\nSitemap: /ok.xml\n"
    body = robots_text(raw)
    assert policy_from_response(200, body).sitemaps("https://example.com/robots.txt") == ["https://example.com/ok.xml"]


def test_it_reads_the_first_group_of_a_robots_txt_that_starts_with_a_byte_order_mark():
    raw = b"\xef\xbb\xbfUser-agent: *\nDisallow: /private/\n"
    assert robots_text(raw) == "User-agent: *\nDisallow: /private/\n"
    for body in (robots_text(raw), raw.decode("utf-8")):  # the second as a row stored before
        assert not policy_from_response(200, body).allows("https://example.com/private/x", AGENT)


def test_it_refuses_a_url_when_robots_txt_refuses_it_as_linked_or_as_canonical():
    policy = policy_from_response(200, "User-agent: *\nDisallow: /search?q=\nDisallow: /*&sort=\n")
    canonical, linked = "https://example.com/search?page=2&q=shoes", "https://example.com/search?q=shoes&page=2"
    assert policy.allows(canonical, AGENT)  # the canonical form alone misses the rule
    assert not policy.allows(canonical, AGENT, as_linked=linked)
    assert not policy.allows("https://example.com/l?a=1&sort=x", AGENT, as_linked="https://example.com/l?sort=x&a=1")
    assert policy.allows(canonical, AGENT, as_linked="https://example.com/search?page=2&q=shoes")


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


def test_the_fetch_stage_asks_robots_txt_about_the_url_as_the_site_linked_it(db):
    """`Disallow: /search?q=` is written in the site's own query order; the canonical URL sorts the
    query (`?page=2&q=shoes`), so only the URL as linked shows the rule applies."""
    from crawl.frontier.discovery import pages_discover
    from crawl.frontier.verdicts import Link
    from crawl.models import Page
    from crawl.services.projects import project_get_or_create, seeds_add
    from fetch.services import pages_fetch
    from tests.servers import Site, SiteServer

    site = Site(default=(200, {"Content-Type": "text/html"}, b"<html><body>ok</body></html>"))
    site.files["/robots.txt"] = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /search?q=\n")
    with SiteServer(site) as server:
        project = project_get_or_create(name="linked", allow_private=True)
        seeds_add(project=project, urls=[f"{server.url}/"])
        (page_id,) = pages_discover(project=project, links=[Link(f"{server.url}/search?q=shoes&page=2", 1)])
        page = Page.objects.get(id=page_id)
        assert page.url.endswith("/search?page=2&q=shoes")
        assert page.linked_url.endswith("/search?q=shoes&page=2")
        pages_fetch(page_ids=[page_id])
        page.refresh_from_db()
        assert (page.state, page.error_code) == ("failed", "robots_disallowed")
        assert "/search" not in " ".join(path for _, path in server.log)


def test_a_robots_txt_that_answers_5xx_holds_its_host_and_fails_no_page(db, settings):
    """A monitored site's robots.txt is down for a while: its pages wait for the host, spending no
    attempt, the hold grows with each failure in a row, and once robots.txt answers the pages are
    fetched. (A one-off crawl's pages take their retries and fail, so the crawl ends.)"""
    from datetime import timedelta

    from django.utils import timezone

    from crawl.hosts import robots_cache
    from crawl.models import Host, Page
    from crawl.services.projects import project_get_or_create, seeds_add
    from fetch.services import pages_fetch
    from tests.servers import Site, SiteServer

    settings.CRAWL_RETRY_BASE_SECONDS = 30.0  # the shipped schedule: the hold starts there
    site = Site(default=(200, {"Content-Type": "text/html"}, b"<html><body>ok</body></html>"))
    site.files["/robots.txt"] = (503, {"Content-Type": "text/plain"}, b"down")
    with SiteServer(site) as server:
        project = project_get_or_create(name="robots-down", allow_private=True, recrawl_every_minutes=60)
        ids = seeds_add(project=project, urls=[f"{server.url}/", f"{server.url}/other"])
        holds = []
        for _ in range(4):
            robots_cache._LOCAL.clear()  # a fresh process: nothing cached
            past = timezone.now() - timedelta(seconds=1)  # the hold is over
            Page.objects.filter(id__in=ids).update(next_fetch_at=past)
            Host.objects.update(backoff_until=None, next_allowed_at=past)
            before = timezone.now()
            pages_fetch(page_ids=ids)
            pages = Page.objects.filter(id__in=ids)
            assert {(p.state, p.attempts) for p in pages} == {("queued", 0)}, "waiting, no attempt spent"
            held = [p for p in pages if p.error_code == "robots_unavailable"]
            holds.append(round(max((p.next_fetch_at - before).total_seconds() for p in held)))
        assert holds == [30, 60, 120, 240], "the hold doubles with each failure in a row"
        site.files["/robots.txt"] = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nAllow: /\n")
        robots_cache._LOCAL.clear()  # a fresh process: nothing cached
        past = timezone.now() - timedelta(seconds=1)
        Page.objects.filter(id__in=ids).update(next_fetch_at=past)
        Host.objects.update(backoff_until=None, next_allowed_at=past)
        assert sorted(pages_fetch(page_ids=ids)) == sorted(ids)
        assert Host.objects.get().failures == 0
