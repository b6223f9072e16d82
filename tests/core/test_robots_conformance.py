"""robots.txt fetch decisions held to the cases of Google's robots.txt parser tests (robots_test.cc)
and RFC 9309. Pure: no database, no network.

Each case is a robots.txt, a user agent, a URL and Google's answer (allowed or not). crawlhub asks
robots.txt about the canonical URL it fetches (core.canonical.canonicalize), so that is what is checked
here: `policy.allows(canonicalize(url), agent)`. Where crawlhub answers otherwise on purpose,
DIFFERENT pins its answer and says why (docs/crawling.md lists the differences).
"""

import pytest

from core.canonical import canonicalize
from core.robots import policy_from_response, robots_text

ROBOTS = {
    "line_correct": "user-agent: FooBot\ndisallow: /\n",
    "line_incorrect": "foo: FooBot\nbar: /\n",
    "line_no_colon": "user-agent FooBot\ndisallow /\n",
    "groups": (
        "allow: /foo/bar/\n\nuser-agent: FooBot\ndisallow: /\nallow: /x/\nuser-agent: BarBot\ndisallow: /\n"
        "allow: /y/\n\n\nallow: /w/\nuser-agent: BazBot\n\nuser-agent: FooBot\nallow: /z/\ndisallow: /\n"
    ),
    "groups_sitemap_inside": "User-agent: BarBot\nSitemap: https://foo.bar/sitemap\nUser-agent: *\nDisallow: /\n",
    "groups_unknown_line": "User-agent: FooBot\nInvalid-Unknown-Line: unknown\nUser-agent: *\nDisallow: /\n",
    "names_upper": "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n",
    "names_lower": "user-agent: FooBot\nallow: /x/\ndisallow: /\n",
    "names_camel": "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n",
    "agent_upper": "User-Agent: FOO\nAllow: /x/\nDisallow: /\n",
    "agent_lower": "User-Agent: foo\nAllow: /x/\nDisallow: /\n",
    "agent_camel": "User-Agent: FoO\nAllow: /x/\nDisallow: /\n",
    "agent_with_space": "User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n",
    "global_empty": "",
    "global_and_specific": "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n",
    "only_specific": "user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\nuser-agent: BazBot\ndisallow: /\n",
    "value_lowercase": "user-agent: FooBot\ndisallow: /x/\n",
    "value_uppercase": "user-agent: FooBot\ndisallow: /X/\n",
    "longest_disallow_page": "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/\n",
    "longest_allow_page": "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n",
    "longest_empty_both": "user-agent: FooBot\ndisallow: \nallow: \n",
    "longest_root_both": "user-agent: FooBot\ndisallow: /\nallow: /\n",
    "longest_x_and_x_slash": "user-agent: FooBot\ndisallow: /x\nallow: /x/\n",
    "longest_same_page": "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/page.html\n",
    "longest_page_vs_star_html": "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n",
    "longest_dot_vs_star_html": "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n",
    "longest_specific_group": "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n",
    "encoding_query": "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n",
    "encoding_raw_utf8": "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/\u30c4\n",
    "encoding_escaped_utf8": "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%E3%83%84\n",
    "encoding_escaped_ascii": "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n",
    "special_star": "User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n",
    "special_dollar": "User-agent: FooBot\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n",
    "special_hash": "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n",
    "index_html": "User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n",
    "doc_fish": "user-agent: FooBot\ndisallow: /\nallow: /fish\n",
    "doc_fish_star": "user-agent: FooBot\ndisallow: /\nallow: /fish*\n",
    "doc_fish_slash": "user-agent: FooBot\ndisallow: /\nallow: /fish/\n",
    "doc_php": "user-agent: FooBot\ndisallow: /\nallow: /*.php\n",
    "doc_php_end": "user-agent: FooBot\ndisallow: /\nallow: /*.php$\n",
    "doc_fish_php": "user-agent: FooBot\ndisallow: /\nallow: /fish*.php\n",
    "order_p": "user-agent: FooBot\nallow: /p\ndisallow: /\n",
    "order_folder": "user-agent: FooBot\nallow: /folder\ndisallow: /folder\n",
    "order_htm": "user-agent: FooBot\nallow: /page\ndisallow: /*.htm\n",
    "order_root_end": "user-agent: FooBot\nallow: /$\ndisallow: /\n",
    "pattern_non_ascii": "User-agent: FooBot\nDisallow: /\u00e1\n",
    "pattern_lower_escape": "User-agent: FooBot\nDisallow: /%aa\n",
    "typo_disallow": "user-agent: FooBot\ndissallow: /a\ndisalow: /b\ndisallaw: /c\n",
    "typo_user_agent": "useragent: FooBot\ndisallow: /\n",
    "crlf_lines": "User-agent: FooBot\r\nDisallow: /x/\r\n",
    "cr_lines": "User-agent: FooBot\rDisallow: /x/\r",
    "trailing_comment": "User-agent: FooBot # our bot\nDisallow: /x/ # private\n",
    "agent_star_in_name": "User-agent: Foo*\nDisallow: /x/\n",
    # GoogleOnly_LineTooLong: a 16 KiB Disallow line (its other checks ask about URLs of 16 KiB, which
    # crawlhub refuses as url_too_long before robots.txt is asked)
    "line_too_long": "user-agent: FooBot\ndisallow: /x/" + "a" * (2083 * 8 - 3 - 10 + 1 - 3) + "/qux\n",
}
# Bytes, read the way crawlhub reads a fetched robots.txt (core.robots.robots_text).
ROBOTS_BYTES = {
    "bom_full": b"\xef\xbb\xbfUser-Agent: foo\nDisallow: /AnyValue\n",
    "bom_partial_2": b"\xef\xbbUser-Agent: foo\nDisallow: /AnyValue\n",
    "bom_partial_1": b"\xefUser-Agent: foo\nDisallow: /AnyValue\n",
    "bom_broken": b"\xef\x11\xbfUser-Agent: foo\nDisallow: /AnyValue\n",
    "bom_in_the_middle": b"User-Agent: foo\n\xef\xbb\xbfDisallow: /AnyValue\n",
}

H = "http://foo.bar"
CASES = [
    # ID_LineSyntax_Line: a line needs its colon (Google accepts a missing one); unknown keys are ignored
    ("line_correct", "FooBot", H + "/x/y", False),
    ("line_incorrect", "FooBot", H + "/x/y", True),
    ("line_no_colon", "FooBot", H + "/x/y", False),
    # ID_LineSyntax_Groups: consecutive user-agent lines make one group; rules outside a group are ignored
    ("groups", "FooBot", H + "/x/b", True),
    ("groups", "FooBot", H + "/z/d", True),
    ("groups", "FooBot", H + "/y/c", False),
    ("groups", "BarBot", H + "/y/c", True),
    ("groups", "BarBot", H + "/w/a", True),
    ("groups", "BarBot", H + "/z/d", False),
    ("groups", "BazBot", H + "/z/d", True),
    ("groups", "FooBot", H + "/foo/bar/", False),
    ("groups", "BarBot", H + "/foo/bar/", False),
    ("groups", "BazBot", H + "/foo/bar/", False),
    # ID_LineSyntax_Groups_OtherRules: other lines do not end a group's user-agent lines
    ("groups_sitemap_inside", "FooBot", H + "/", False),
    ("groups_sitemap_inside", "BarBot", H + "/", False),
    ("groups_unknown_line", "FooBot", H + "/", False),
    ("groups_unknown_line", "BarBot", H + "/", False),
    # ID_REPLineNamesCaseInsensitive
    ("names_upper", "FooBot", H + "/x/y", True),
    ("names_lower", "FooBot", H + "/x/y", True),
    ("names_camel", "FooBot", H + "/x/y", True),
    ("names_upper", "FooBot", H + "/a/b", False),
    ("names_lower", "FooBot", H + "/a/b", False),
    ("names_camel", "FooBot", H + "/a/b", False),
    # ID_UserAgentValueCaseInsensitive
    ("agent_upper", "Foo", H + "/x/y", True),
    ("agent_lower", "Foo", H + "/x/y", True),
    ("agent_camel", "Foo", H + "/x/y", True),
    ("agent_upper", "Foo", H + "/a/b", False),
    ("agent_lower", "Foo", H + "/a/b", False),
    ("agent_camel", "Foo", H + "/a/b", False),
    # GoogleOnly_AcceptUserAgentUpToFirstSpace
    ("agent_with_space", "Foo", H + "/x/y", True),
    ("agent_with_space", "Foo Bar", H + "/x/y", False),
    # ID_GlobalGroups_Secondary
    ("global_empty", "FooBot", H + "/x/y", True),
    ("global_and_specific", "FooBot", H + "/x/y", False),
    ("global_and_specific", "BarBot", H + "/x/y", True),
    ("only_specific", "QuxBot", H + "/x/y", True),
    # ID_AllowDisallow_Value_CaseSensitive
    ("value_lowercase", "FooBot", H + "/x/y", False),
    ("value_uppercase", "FooBot", H + "/x/y", True),
    # ID_LongestMatch
    ("longest_disallow_page", "FooBot", H + "/x/page.html", False),
    ("longest_allow_page", "FooBot", H + "/x/page.html", True),
    ("longest_allow_page", "FooBot", H + "/x/", False),
    ("longest_empty_both", "FooBot", H + "/x/page.html", True),
    ("longest_root_both", "FooBot", H + "/x/page.html", True),
    ("longest_x_and_x_slash", "FooBot", H + "/x", False),
    ("longest_x_and_x_slash", "FooBot", H + "/x/", True),
    ("longest_same_page", "FooBot", H + "/x/page.html", True),
    ("longest_page_vs_star_html", "FooBot", H + "/page.html", False),
    ("longest_page_vs_star_html", "FooBot", H + "/page", True),
    ("longest_dot_vs_star_html", "FooBot", H + "/x/page.html", True),
    ("longest_dot_vs_star_html", "FooBot", H + "/x/y.html", False),
    ("longest_specific_group", "FooBot", H + "/x/page", True),
    ("longest_specific_group", "FooBot", H + "/y/page", False),
    # ID_Encoding
    ("encoding_query", "FooBot", H + "/foo/bar?qux=taz&baz=http://foo.bar?tar&par", True),
    ("encoding_raw_utf8", "FooBot", H + "/foo/bar/%E3%83%84", True),
    ("encoding_raw_utf8", "FooBot", H + "/foo/bar/\u30c4", False),
    ("encoding_escaped_utf8", "FooBot", H + "/foo/bar/%E3%83%84", True),
    ("encoding_escaped_utf8", "FooBot", H + "/foo/bar/\u30c4", False),
    ("encoding_escaped_ascii", "FooBot", H + "/foo/bar/baz", False),
    ("encoding_escaped_ascii", "FooBot", H + "/foo/bar/%62%61%7A", True),
    # ID_SpecialCharacters
    ("special_star", "FooBot", H + "/foo/bar/quz", False),
    ("special_star", "FooBot", H + "/foo/quz", True),
    ("special_star", "FooBot", H + "/foo//quz", True),
    ("special_star", "FooBot", H + "/foo/bax/quz", True),
    ("special_dollar", "FooBot", H + "/foo/bar", False),
    ("special_dollar", "FooBot", H + "/foo/bar/qux", True),
    ("special_dollar", "FooBot", H + "/foo/bar/", True),
    ("special_dollar", "FooBot", H + "/foo/bar/baz", True),
    ("special_hash", "FooBot", H + "/foo/bar", True),
    ("special_hash", "FooBot", H + "/foo/quz", False),
    # GoogleOnly_IndexHTMLisDirectory
    ("index_html", "foobot", "http://foo.com/allowed-slash/", True),
    ("index_html", "foobot", "http://foo.com/allowed-slash/index.htm", False),
    ("index_html", "foobot", "http://foo.com/allowed-slash/index.html", True),
    ("index_html", "foobot", "http://foo.com/anyother-url", False),
    # GoogleOnly_DocumentationChecks: "/fish"
    ("doc_fish", "FooBot", H + "/bar", False),
    ("doc_fish", "FooBot", H + "/fish", True),
    ("doc_fish", "FooBot", H + "/fish.html", True),
    ("doc_fish", "FooBot", H + "/fish/salmon.html", True),
    ("doc_fish", "FooBot", H + "/fishheads", True),
    ("doc_fish", "FooBot", H + "/fishheads/yummy.html", True),
    ("doc_fish", "FooBot", H + "/fish.html?id=anything", True),
    ("doc_fish", "FooBot", H + "/Fish.asp", False),
    ("doc_fish", "FooBot", H + "/catfish", False),
    ("doc_fish", "FooBot", H + "/?id=fish", False),
    # "/fish*" is "/fish"
    ("doc_fish_star", "FooBot", H + "/bar", False),
    ("doc_fish_star", "FooBot", H + "/fish", True),
    ("doc_fish_star", "FooBot", H + "/fish.html", True),
    ("doc_fish_star", "FooBot", H + "/fish/salmon.html", True),
    ("doc_fish_star", "FooBot", H + "/fishheads", True),
    ("doc_fish_star", "FooBot", H + "/fishheads/yummy.html", True),
    ("doc_fish_star", "FooBot", H + "/fish.html?id=anything", True),
    ("doc_fish_star", "FooBot", H + "/Fish.bar", False),
    ("doc_fish_star", "FooBot", H + "/catfish", False),
    ("doc_fish_star", "FooBot", H + "/?id=fish", False),
    # "/fish/" is not "/fish"
    ("doc_fish_slash", "FooBot", H + "/bar", False),
    ("doc_fish_slash", "FooBot", H + "/fish/", True),
    ("doc_fish_slash", "FooBot", H + "/fish/salmon", True),
    ("doc_fish_slash", "FooBot", H + "/fish/?salmon", True),
    ("doc_fish_slash", "FooBot", H + "/fish/salmon.html", True),
    ("doc_fish_slash", "FooBot", H + "/fish/?id=anything", True),
    ("doc_fish_slash", "FooBot", H + "/fish", False),
    ("doc_fish_slash", "FooBot", H + "/fish.html", False),
    ("doc_fish_slash", "FooBot", H + "/Fish/Salmon.html", False),
    # "/*.php"
    ("doc_php", "FooBot", H + "/bar", False),
    ("doc_php", "FooBot", H + "/filename.php", True),
    ("doc_php", "FooBot", H + "/folder/filename.php", True),
    ("doc_php", "FooBot", H + "/folder/filename.php?parameters", True),
    ("doc_php", "FooBot", H + "//folder/any.php.file.html", True),
    ("doc_php", "FooBot", H + "/filename.php/", True),
    ("doc_php", "FooBot", H + "/index?f=filename.php/", True),
    ("doc_php", "FooBot", H + "/php/", False),
    ("doc_php", "FooBot", H + "/index?php", False),
    ("doc_php", "FooBot", H + "/windows.PHP", False),
    # "/*.php$"
    ("doc_php_end", "FooBot", H + "/bar", False),
    ("doc_php_end", "FooBot", H + "/filename.php", True),
    ("doc_php_end", "FooBot", H + "/folder/filename.php", True),
    ("doc_php_end", "FooBot", H + "/filename.php?parameters", False),
    ("doc_php_end", "FooBot", H + "/filename.php/", False),
    ("doc_php_end", "FooBot", H + "/filename.php5", False),
    ("doc_php_end", "FooBot", H + "/php/", False),
    ("doc_php_end", "FooBot", H + "/filename?php", False),
    ("doc_php_end", "FooBot", H + "/aaaphpaaa", False),
    ("doc_php_end", "FooBot", H + "//windows.PHP", False),
    # "/fish*.php"
    ("doc_fish_php", "FooBot", H + "/bar", False),
    ("doc_fish_php", "FooBot", H + "/fish.php", True),
    ("doc_fish_php", "FooBot", H + "/fishheads/catfish.php?parameters", True),
    ("doc_fish_php", "FooBot", H + "/Fish.PHP", False),
    # Order of precedence for group-member records
    ("order_p", "FooBot", "http://example.com/page", True),
    ("order_folder", "FooBot", "http://example.com/folder/page", True),
    ("order_htm", "FooBot", "http://example.com/page.htm", False),
    ("order_root_end", "FooBot", "http://example.com/", True),
    ("order_root_end", "FooBot", "http://example.com/page.html", False),
    # TestMaybeEscapePattern: patterns are compared percent-encoded, escapes in upper case
    ("pattern_non_ascii", "FooBot", H + "/\u00e1", False),
    ("pattern_non_ascii", "FooBot", H + "/%C3%A1", False),
    ("pattern_lower_escape", "FooBot", H + "/%AA", False),
    # robots.cc: Google accepts common misspellings of the directive names
    ("typo_disallow", "FooBot", H + "/a", False),
    ("typo_disallow", "FooBot", H + "/b", False),
    ("typo_disallow", "FooBot", H + "/c", False),
    ("typo_user_agent", "FooBot", H + "/x", False),
    # RFC 9309 2.2: lines end with CR, LF or CRLF; "#" starts a comment
    ("crlf_lines", "FooBot", H + "/x/y", False),
    ("cr_lines", "FooBot", H + "/x/y", False),
    ("trailing_comment", "FooBot", H + "/x/y", False),
    ("trailing_comment", "FooBot", H + "/y", True),
    # robots.cc: a "*" inside a user-agent name is not a wildcard (the name ends at it)
    ("agent_star_in_name", "FooBot", H + "/x/y", False),
    ("line_too_long", "FooBot", H + "/fux", True),
    # ID_UTF8ByteOrderMarkIsSkipped, as fetch decisions
    ("bom_full", "foo", H + "/AnyValue", False),
    ("bom_partial_2", "foo", H + "/AnyValue", False),
    ("bom_partial_1", "foo", H + "/AnyValue", False),
    ("bom_broken", "foo", H + "/AnyValue", True),  # the first line is garbage: "Disallow" has no group
    ("bom_in_the_middle", "foo", H + "/AnyValue", True),  # that line is garbage: the group has no rule
]

# (robots, agent, url) -> (crawlhub's answer, why)
DIFFERENT = {
    ("groups_unknown_line", "FooBot", H + "/"): (
        True,
        "protego (not ours) ends the user-agent lines of a group at any other line, so FooBot's group "
        "is empty and '*' does not apply to it; RFC 9309 says unknown lines must not change the groups",
    ),
    ("agent_with_space", "Foo", H + "/x/y"): (
        False,
        "protego keeps the group name 'foo bar' whole; 'Foo' does not contain it and gets '*'",
    ),
    ("agent_with_space", "Foo Bar", H + "/x/y"): (
        True,
        "Google refuses an agent that is not a product token; crawlhub hands protego its whole "
        "User-Agent string, which gets the group whose name it contains",
    ),
    ("encoding_query", "FooBot", H + "/foo/bar?qux=taz&baz=http://foo.bar?tar&par"): (
        False,
        "crawlhub requests the canonical URL (query sorted and escaped: '?baz=http%3A...&par=&qux=taz') "
        "and robots.txt rules the URL requested: the Allow names another request, so Disallow: / holds",
    ),
    ("encoding_raw_utf8", "FooBot", H + "/foo/bar/\u30c4"): (
        True,
        "Google leaves escaping to its caller; crawlhub asks about the URL it requests, escaped (%E3%83%84)",
    ),
    ("encoding_escaped_utf8", "FooBot", H + "/foo/bar/\u30c4"): (
        True,
        "as above: the request is for /foo/bar/%E3%83%84, which the Allow names",
    ),
    ("encoding_escaped_ascii", "FooBot", H + "/foo/bar/baz"): (
        True,
        "protego and w3lib read '%62%61%7A' as 'baz' (RFC 3986: escaped unreserved characters are those "
        "characters); Google compares the octets, and says not to rely on either reading",
    ),
}


def decision(robots: str, agent: str, url: str) -> bool:
    body = robots_text(ROBOTS_BYTES[robots]) if robots in ROBOTS_BYTES else ROBOTS[robots]
    return policy_from_response(200, body).allows(canonicalize(url), agent)


@pytest.mark.parametrize(("robots", "agent", "url", "google"), CASES)
def test_it_decides_as_googles_parser_or_as_pinned(robots, agent, url, google):
    expected, why = DIFFERENT.get((robots, agent, url), (google, ""))
    assert decision(robots, agent, url) is expected, why or "Google's answer"


def test_every_pinned_difference_is_a_case_and_differs_from_google():
    answers = {(robots, agent, url): google for robots, agent, url, google in CASES}
    for key, (ours, _) in DIFFERENT.items():
        assert key in answers
        assert ours is not answers[key]


# ID_NonStandardLineExample_Sitemap: a Sitemap line may appear anywhere, in or out of a group.
@pytest.mark.parametrize(
    "body",
    [
        "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nSitemap: http://foo.bar/sitemap.xml\n",
        "Sitemap: http://foo.bar/sitemap.xml\nUser-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\n",
    ],
)
def test_it_finds_a_sitemap_line_anywhere(body):
    assert policy_from_response(200, body).sitemaps("http://foo.bar/robots.txt") == ["http://foo.bar/sitemap.xml"]
