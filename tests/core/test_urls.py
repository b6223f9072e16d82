"""core.canonical: canonical URLs, URL keys and scope. Pure functions: no database, no network."""

import re
from urllib.parse import urlsplit

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from core.canonical import MAX_URL_LENGTH, InvalidURL, Scope, canonicalize, url_key


def invalid_code(url: str) -> str:
    with pytest.raises(InvalidURL) as caught:
        canonicalize(url)
    return caught.value.code


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:8080/a", "http://example.com:8080/a"),
        ("https://example.com:80/a", "https://example.com:80/a"),
    ],
)
def test_it_strips_only_the_default_port_of_the_scheme(url, canonical):
    assert canonicalize(url) == canonical


def test_it_lowercases_scheme_and_host_but_not_the_path():
    assert canonicalize("HTTP://WWW.Example.COM/Path/To/Page") == "http://www.example.com/Path/To/Page"


def test_it_drops_the_trailing_dot_of_a_fully_qualified_host():
    assert canonicalize("http://example.com./a") == "http://example.com/a"


def test_it_sorts_the_query():
    assert canonicalize("http://example.com/s?b=2&a=1&c=") == "http://example.com/s?a=1&b=2&c="


def test_it_drops_the_fragment():
    assert canonicalize("http://example.com/a?x=1#section-2") == "http://example.com/a?x=1"


def test_it_gives_an_empty_path_a_slash():
    assert canonicalize("http://example.com") == "http://example.com/"


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),
        ("http://example.com/a/b/../../c/", "http://example.com/c/"),
        ("http://example.com/../../x", "http://example.com/x"),
    ],
)
def test_it_resolves_dot_segments(url, canonical):
    assert canonicalize(url) == canonical


def test_it_strips_tracking_and_session_params_and_keeps_the_others():
    url = "http://example.com/p?utm_source=news&UTM_Medium=mail&id=3&fbclid=abc&sessionid=s1&gclid=x&page=2"
    assert canonicalize(url) == "http://example.com/p?id=3&page=2"


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        # PHP-Nuke and Slashcode name their articles "sid": each is a page of its own
        (
            "http://e.com/modules.php?name=News&file=article&sid=123",
            "http://e.com/modules.php?file=article&name=News&sid=123",
        ),
        ("http://e.com/article.pl?sid=04/05/12/1234567", "http://e.com/article.pl?sid=04%2F05%2F12%2F1234567"),
        # phpBB's session id is 32 hex digits: every visit would be a new key
        ("http://e.com/viewtopic.php?t=5&sid=0123456789abcdef0123456789ABCDEF", "http://e.com/viewtopic.php?t=5"),
    ],
)
def test_it_drops_sid_only_when_it_looks_like_a_session_token(url, canonical):
    assert canonicalize(url) == canonical


def test_it_drops_a_query_made_only_of_tracking_params():
    assert canonicalize("http://example.com/p?utm_campaign=x&fbclid=y") == "http://example.com/p"


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("http://example.com/s?q=caf%E9", "http://example.com/s?q=caf%E9"),  # Latin-1
        ("http://example.com/s?q=%93%FA%96%7B&utm_source=x", "http://example.com/s?q=%93%FA%96%7B"),  # Shift_JIS
        ("http://example.com/s?q=%C6%FC%CB%DC&fbclid=1&p=2", "http://example.com/s?p=2&q=%C6%FC%CB%DC"),  # EUC-JP
    ],
)
def test_it_keeps_query_escapes_that_are_not_utf8_as_written(url, canonical):
    assert canonicalize(url) == canonical


def test_it_gives_two_non_utf8_queries_two_keys():
    assert canonicalize("http://example.com/s?q=%E9") != canonicalize("http://example.com/s?q=%E8")


def test_it_normalises_percent_escapes_and_non_ascii_paths():
    assert canonicalize("http://example.com/%7Euser/caf\u00e9?q=a b") == "http://example.com/~user/caf%C3%A9?q=a+b"


def test_it_encodes_international_host_names_as_punycode():
    assert canonicalize("http://b\u00fccher.example/") == "http://xn--bcher-kva.example/"


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("http://%41.com/", "http://a.com/"),  # escapes in a host are decoded
        ("http://\uff27\uff4f.com/", "http://go.com/"),  # full-width letters are mapped
        ("http://www.foo\u3002bar.com/", "http://www.foo.bar.com/"),  # so is the ideographic full stop
        ("http://0x7f.1/", "http://127.0.0.1/"),  # numeric IPv4 forms are written out
        ("http://2130706433/", "http://127.0.0.1/"),
        ("http://0177.0.0.1:8080/", "http://127.0.0.1:8080/"),
        ("http://\u2603.net/", "http://xn--n3h.net/"),  # UTS 46 allows what IDNA 2008 refuses
    ],
)
def test_it_reads_hosts_as_browsers_do(url, canonical):
    assert canonicalize(url) == canonical


@pytest.mark.parametrize(
    "url", ["http://a b.com/", "http://hello%00/", "http://%25/", "http://\ufdd0zyx.com/", "http://1.2.3.256/",
            "http://example.123/", "http://a<b.com/"]
)  # fmt: skip
def test_it_refuses_hosts_a_browser_refuses(url):
    with pytest.raises(InvalidURL) as refused:
        canonicalize(url)
    assert refused.value.code == "invalid_url"


_HOST_PARTS = st.sampled_from(
    ["0x", "0", "1", "255", "256", "7f", ".", "..", "%2e", "%41", "%", "%zz", "a", "\u00df", "\uff27", "\u3002",
     "\uff0e", "\u2603", "xn--", "-", "_", " ", "\ufdd0", "\u00e9", "E", "9"]
)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.lists(_HOST_PARTS, min_size=1, max_size=8).map("".join))
def test_a_host_read_as_browsers_read_it_is_lowercase_ascii_and_reads_the_same_again(host):
    try:
        once = canonicalize(f"http://{host}/p")
    except InvalidURL:
        return
    read = urlsplit(once).netloc
    assert read.isascii() and read == read.lower()
    assert canonicalize(once) == once


def test_it_encodes_host_names_by_uts46_like_browsers_so_sharp_s_is_not_ss():
    assert canonicalize("https://fa\u00df.example/") == "https://xn--fa-hia.example/"
    assert canonicalize("https://fa\u00df.de/") != canonicalize("https://fass.de/")
    assert canonicalize("https://FA\u00df.DE/") == "https://xn--fa-hia.de/"  # UTS 46 maps case first


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("http://[2001:DB8::1]/x", "http://[2001:db8::1]/x"),
        ("http://[2001:db8::1]:80/x", "http://[2001:db8::1]/x"),
        ("https://[::1]:8443/x?b=1&a=2", "https://[::1]:8443/x?a=2&b=1"),
    ],
)
def test_it_keeps_ipv6_literal_hosts_in_brackets(url, canonical):
    assert canonicalize(url) == canonical


def test_it_reads_backslashes_before_the_query_as_slashes_like_a_browser():
    assert canonicalize("http://example.com\\a\\b?x=\\") == "http://example.com/a/b?x=%5C"
    # the host a browser would contact, not "evil.example\\@good.example"
    assert canonicalize("http://evil.example\\@good.example/") == "http://evil.example/@good.example/"


def test_it_escapes_a_stray_percent_so_a_second_pass_changes_nothing():
    once = canonicalize("http://example.com/%%41b/100%")
    assert once == "http://example.com/%25Ab/100%25"
    assert canonicalize(once) == once


@pytest.mark.parametrize(
    "url",
    [
        "mailto:editor@example.com",
        "javascript:void(0)",
        "ftp://files.example.com/a.zip",
        "file:///etc/passwd",
        "data:text/html,<b>x</b>",
        "tel:+441234567",
    ],
)
def test_it_blocks_non_http_schemes(url):
    assert invalid_code(url) == "blocked_scheme"


@pytest.mark.parametrize(
    "url",
    [
        "",
        "   ",
        "example.com/path",
        "//example.com/path",
        "/relative/path",
        "http://",
        "http:///path",
        "https://:443/",
        "http://example.com:99999/",
        "http://example.com:port/",
        "http://[::1/",
    ],
)
def test_it_refuses_urls_without_scheme_or_host_or_with_a_bad_port(url):
    assert invalid_code(url) == "invalid_url"


def test_it_refuses_over_long_urls():
    longest = "http://example.com/" + "a" * (MAX_URL_LENGTH - len("http://example.com/"))
    assert canonicalize(longest) == longest
    assert invalid_code(longest + "a") == "url_too_long"


_label = st.from_regex(r"[a-zA-Z0-9]([a-zA-Z0-9-]{0,8}[a-zA-Z0-9])?", fullmatch=True)
_hosts = st.one_of(
    st.lists(_label, min_size=1, max_size=4).map(".".join),
    st.sampled_from(["[::1]", "[2001:DB8::A]", "127.0.0.1", "b\u00fccher.example", "EXAMPLE.com."]),
)
_ports = st.one_of(st.just(""), st.sampled_from([":80", ":443", ":8080"]), st.integers(0, 65535).map(":{}".format))
_pieces = st.sampled_from(
    [
        *"aZ09-._~!$&'()*+,;=:@/?#%[]\\ \"<>^`{|}",
        "%2e",
        "%2F",
        "%41",
        "%zz",
        "\u00e9",
        "\u65e5",
        "..",
        "./",
        "//",
        "utm_source=x",
        "fbclid=1",
        "sessionid=2",
        "a=1",
        "B=2",
        "&",
        "=",
    ]
)
_chunk = st.lists(_pieces, max_size=12).map("".join)
http_urls = st.builds(
    "{}://{}{}/{}?{}#{}".format,
    st.sampled_from(["http", "https", "HTTP", "hTTps"]),
    _hosts,
    _ports,
    _chunk,
    _chunk,
    _chunk,
)


@settings(max_examples=300, deadline=None)
@given(http_urls)
@example("http://example.com/%%41bc")  # w3lib alone: "%Abc", then "%ABc"
@example("http://h\u00e9.\\x/")  # urlsplit alone: host "h\u00e9.\\x"; w3lib: host "xn--h-bga." then "xn--h-bga"
def test_it_is_idempotent_on_http_urls(url):
    try:
        once = canonicalize(url)
    except InvalidURL:
        return
    assert canonicalize(once) == once


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), http_urls, st.text().map("http://{}".format), st.text().map("https://[{}".format)))
@example("http://a@\\o/")  # once canonicalized to "http:///o/", a URL without a host
def test_it_raises_nothing_but_invalid_url_on_arbitrary_text(text):
    try:
        canonical, code = canonicalize(text), ""
    except InvalidURL as exc:
        canonical, code = "", exc.code
    assert code in {"", "invalid_url", "blocked_scheme", "url_too_long"}
    if canonical:
        parts = urlsplit(canonical)
        assert parts.scheme in ("http", "https")
        assert parts.hostname


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_it_keys_any_url_with_64_hex_chars(url):
    assert re.fullmatch(r"[0-9a-f]{64}", url_key(url))


def test_it_keys_equal_urls_equally_and_different_urls_differently():
    assert url_key("http://example.com/a") == url_key("http://example.com/a")
    assert url_key("http://example.com/a") != url_key("http://example.com/b")


def test_it_keys_a_url_with_a_lone_surrogate():
    assert len(url_key("http://example.com/\ud800")) == 64


def test_it_rejects_offsite_urls_and_accepts_subdomains():
    scope = Scope.build(domains=["Example.com"])
    assert scope.rejects("http://example.com/a", 0) is None
    assert scope.rejects("http://blog.example.com/a", 0) is None
    assert scope.rejects("http://other.org/a", 0) == "offsite"
    assert scope.rejects("http://notexample.com/a", 0) == "offsite"
    assert scope.rejects("http://example.com.evil.org/a", 0) == "offsite"


def test_it_ignores_a_leading_dot_in_a_scope_domain():
    assert Scope.build(domains=[".example.com"]).rejects("http://example.com/", 0) is None


def test_it_accepts_any_host_when_no_domains_are_given():
    assert Scope.build(domains=[]).rejects("http://anything.example/", 0) is None


def test_it_rejects_urls_deeper_than_max_depth():
    scope = Scope.build(domains=["example.com"], max_depth=2)
    assert scope.rejects("http://example.com/a", 2) is None
    assert scope.rejects("http://example.com/a", 3) == "depth"
    assert Scope.build(domains=["example.com"]).rejects("http://example.com/a", 10_000) is None


def test_it_applies_deny_patterns_before_allow_patterns():
    scope = Scope.build(domains=["example.com"], allow=[r"/blog/"], deny=[r"/private/", r"\?print=1$"])
    assert scope.rejects("http://example.com/blog/post", 1) is None
    assert scope.rejects("http://example.com/shop/item", 1) == "not_allowed"
    assert scope.rejects("http://example.com/blog/private/draft", 1) == "denied"
    assert scope.rejects("http://example.com/blog/post?print=1", 1) == "denied"


def test_it_checks_depth_before_host_and_host_before_patterns():
    scope = Scope.build(domains=["example.com"], max_depth=0, deny=[r"."])
    assert scope.rejects("http://other.org/", 1) == "depth"
    assert scope.rejects("http://other.org/", 0) == "offsite"
    assert scope.rejects("http://example.com/", 0) == "denied"


def test_a_scope_built_from_seeds_keeps_to_their_ports():
    scope = Scope.build(domains=["127.0.0.1"], origins=["http://127.0.0.1:19002/"])
    assert scope.rejects("http://127.0.0.1:19002/a", 1) is None
    assert scope.rejects("http://127.0.0.1:8000/admin/", 1) == "other_port"
    assert scope.rejects("http://127.0.0.1/", 1) == "other_port"
    code, why = scope.refusal("http://127.0.0.1:8000/admin/", 1)
    assert code == "other_port" and "8000" in why and "allowed_domains" in why


def test_a_scope_of_default_ports_follows_http_to_https_and_subdomains_but_not_other_ports():
    scope = Scope.build(domains=["example.com"], origins=["http://example.com/"])
    assert scope.rejects("https://example.com/a", 1) is None, "the site moved to https: the same site"
    assert scope.rejects("http://blog.example.com/a", 1) is None
    assert scope.rejects("http://example.com:8080/a", 1) == "other_port"


def test_a_scope_of_named_domains_allows_every_port_of_them():
    scope = Scope.build(domains=["127.0.0.1"])
    assert scope.rejects("http://127.0.0.1:8000/", 1) is None
    assert scope.rejects("http://127.0.0.1:19002/", 1) is None
