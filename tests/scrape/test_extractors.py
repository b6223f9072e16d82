"""scrape.extractors: title, text, links and media refs from saved HTML. Pure: no database, no network."""

from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.hrefs import absolute_http_url
from scrape.extractors import Extraction, extract_html, looks_like_html, media_kind_of

FIXTURES = Path(__file__).parents[1] / "fixtures"
PAGE_URL = "https://news.example.com/local/2024/park.html"
DOCS_PAGE = (FIXTURES / "docs_page.html").read_bytes()  # blocks, inline markup, lists, a table, pre


def extract_fixture(name: str, *, charset: str | None = None, base_url: str = PAGE_URL) -> Extraction:
    return extract_html((FIXTURES / name).read_bytes(), base_url, charset=charset)


@pytest.fixture(scope="module")
def article() -> Extraction:
    return extract_fixture("article.html")


def urls_of(extraction: Extraction) -> list[str]:
    return [link.url for link in extraction.links]


def media_of(extraction: Extraction) -> dict[str, str]:
    return {ref.url: ref.kind for ref in extraction.media}


def test_it_reads_title_description_and_lang_with_whitespace_collapsed(article):
    assert article.title == "City council approves new riverside park"
    assert article.description == "The council voted 7-2 on Tuesday to turn the old freight yard into a public park."
    assert article.lang == "en-GB"


def test_it_keeps_visible_text_and_drops_script_style_noscript_and_template(article):
    assert "Work starts in spring." in article.text
    assert "The council voted 7\u20132 on Tuesday" in article.text
    assert "\u00a9 2024 Example News" in article.text
    assert "LEAK" not in article.text
    assert "dataLayer" not in article.text
    assert "  " not in article.text


def test_it_resolves_links_against_the_page_and_drops_fragments_and_duplicates(article):
    assert urls_of(article) == [
        "https://news.example.com/",
        "https://news.example.com/local/",
        "https://news.example.com/sport/",
        "https://news.example.com/authors/jane-doe",
        "https://news.example.com/docs/park-plan.pdf",
        "https://media.example.net/raw/meeting.MP4",
        "https://ads.example.org/click?id=42",
        "https://news.example.com/local/2024/park-history.html",
        "https://cdn.example.com/story?id=7",
        "https://news.example.com/map/north",
    ]


def test_it_keeps_the_text_of_the_first_occurrence_of_a_link(article):
    texts = {link.url: link.text for link in article.links}
    assert texts["https://news.example.com/local/"] == "Local"
    assert texts["https://news.example.com/local/2024/park-history.html"] == "History of the yard"


def test_it_skips_mailto_tel_javascript_ftp_and_empty_hrefs(article):
    schemes = {urlsplit(url).scheme for url in urls_of(article)}
    assert schemes == {"https"}
    assert not any("mailto" in url or "javascript" in url or "files.example.com" in url for url in urls_of(article))


def test_it_marks_nofollow_links(article):
    nofollow = [link.url for link in article.links if link.nofollow]
    assert nofollow == ["https://ads.example.org/click?id=42"]


def test_it_finds_images_from_src_srcset_picture_and_poster(article):
    media = media_of(article)
    for url in [
        "https://news.example.com/img/park-800.jpg",
        "https://news.example.com/img/park-800.avif",
        "https://news.example.com/img/park-1600.avif",
        "https://news.example.com/img/video-poster.png",
    ]:
        assert media[url] == "image"


def test_it_keeps_commas_inside_srcset_urls(article):
    media = media_of(article)
    assert media["https://res.cloudinary.com/demo/image/upload/w_800,h_450,c_fill/park.jpg"] == "image"
    assert media["https://res.cloudinary.com/demo/image/upload/w_1600,h_900,c_fill/park.jpg"] == "image"


def test_it_finds_every_source_of_a_video_and_an_audio_element(article):
    media = media_of(article)
    assert media["https://news.example.com/video/council-vote.webm"] == "video"
    assert media["https://news.example.com/video/council-vote.mp4"] == "video"
    assert media["https://news.example.com/audio/interview.mp3"] == "audio"
    assert media["https://news.example.com/audio/interview.ogg"] == "audio"


def test_it_treats_links_to_media_files_as_media_but_not_pdfs(article):
    media = media_of(article)
    assert media["https://media.example.net/raw/meeting.MP4"] == "video"
    assert "https://news.example.com/docs/park-plan.pdf" not in media
    assert "https://news.example.com/docs/park-plan.pdf" in urls_of(article)


def test_it_lists_each_media_url_once(article):
    urls = [ref.url for ref in article.media]
    assert len(urls) == len(set(urls)) == 12  # og:image included


def test_it_takes_a_plain_src_as_one_url_even_with_commas_or_spaces():
    body = (
        b'<img src="https://res.cloudinary.com/demo/image/upload/w_300,h_200/a.jpg">'
        b'<img src="/img/my photo.jpg"><img srcset="/b.jpg, /c.jpg 2x">'
    )
    assert media_of(extract_html(body, "http://example.com/")) == {
        "https://res.cloudinary.com/demo/image/upload/w_300,h_200/a.jpg": "image",
        "http://example.com/img/my photo.jpg": "image",
        "http://example.com/b.jpg": "image",
        "http://example.com/c.jpg": "image",
    }


def test_it_resolves_relative_urls_against_base_href():
    extraction = extract_fixture("base_href.html", base_url="http://site.example/gallery/index.html")
    assert urls_of(extraction) == [
        "https://cdn.example.org/assets/v2/photos/one.html",
        "https://cdn.example.org/root.html",
        "https://other.example.com/x",
    ]
    assert media_of(extraction) == {
        "https://cdn.example.org/assets/v2/thumbs/one.png": "image",
        "https://cdn.example.org/assets/v2/thumbs/one@2x.png": "image",
        "https://cdn.example.org/assets/v2/thumbs/one@3x.png": "image",
    }


def test_it_ignores_a_non_http_base_href():
    body = b'<html><head><base href="javascript:alert(1)"></head><body><a href="a.html">a</a></body></html>'
    assert urls_of(extract_html(body, "http://example.com/dir/page.html")) == ["http://example.com/dir/a.html"]


@pytest.mark.parametrize("charset", [None, "windows-1252", "cp1252", "windows_1252"])
def test_it_decodes_a_windows_1252_page(charset):
    extraction = extract_fixture("windows1252.html", charset=charset)
    assert extraction.title == "Caf\u00e9 \u201cLe Z\u00e8bre\u201d \u2013 menu \u00e0 12\u20ac"
    assert "Cr\u00e8me br\u00fbl\u00e9e, na\u00efvet\u00e9" in extraction.text
    assert extraction.lang == "fr"
    assert urls_of(extraction) == ["https://news.example.com/menu/caf\u00e9.html"]


@pytest.mark.parametrize("charset", [None, "shift_jis", "Shift_JIS"])
def test_it_decodes_a_shift_jis_page_declared_by_meta(charset):
    extraction = extract_fixture("shift_jis.html", charset=charset)
    assert extraction.title == "\u65e5\u672c\u8a9e\u306e\u30da\u30fc\u30b8"
    assert extraction.description == "\u30c6\u30b9\u30c8\u7528\u306e\u8aac\u660e"
    assert "\u672c\u6587\u3067\u3059\u3002" in extraction.text
    assert urls_of(extraction) == ["https://news.example.com/\u30da\u30fc\u30b8.html"]


@pytest.mark.parametrize("charset", ["shift_jis", "sjis", "shift_jisx0213", "cp932"])
def test_it_decodes_an_undeclared_page_with_the_charset_argument(charset):
    extraction = extract_fixture("shift_jis_undeclared.html", charset=charset)
    assert extraction.title == "\u65e5\u672c\u8a9e\u306e\u30da\u30fc\u30b8"
    assert extraction.text == "\u672c\u6587\u3067\u3059\u3002"


def test_it_prefers_the_charset_argument_to_a_wrong_meta_declaration():
    body = '<meta charset="shift_jis"><title>\u65e5\u672c\u8a9e caf\u00e9</title>'.encode()
    assert extract_html(body, PAGE_URL, charset="utf-8").title == "\u65e5\u672c\u8a9e caf\u00e9"


@pytest.mark.parametrize(
    "charset", ["no-such-charset", "rot13", "idna", "utf_8", "latin_1", "euc_jp", "koi8_r", "cp437", "x-user-defined"]
)
def test_it_never_fails_on_an_odd_charset_argument(charset):
    extraction = extract_html(b"<title>Plain title</title><a href='/a'>a</a>", PAGE_URL, charset=charset)
    assert extraction.title == "Plain title"
    assert urls_of(extraction) == ["https://news.example.com/a"]


@pytest.mark.parametrize(
    ("body", "charset"),
    [
        (b"\xef\xbb\xbf<title>caf\xc3\xa9</title>", "windows-1252"),
        (b"\xff\xfe" + "<title>caf\u00e9</title>".encode("utf-16-le"), "utf-8"),
        (b"\xfe\xff" + "<title>caf\u00e9</title>".encode("utf-16-be"), None),
    ],
)
def test_it_lets_a_byte_order_mark_win_over_the_charset_argument(body, charset):
    assert extract_html(body, PAGE_URL, charset=charset).title == "caf\u00e9"


def test_it_survives_malformed_html():
    extraction = extract_fixture("malformed.html")
    assert extraction.title == "Unclosed & broken"
    assert extraction.description == "Unquoted"
    assert urls_of(extraction) == [
        "https://news.example.com/unquoted.html",
        "https://news.example.com/single.html",
        "https://news.example.com/nested.html",
        "https://news.example.com/cell.html",
        "http://no-host",  # "http:///no-host": a browser ignores the extra slash
        "https://news.example.com/spaced.html",
        "https://news.example.com/after-end.html",
    ]
    assert media_of(extraction) == {"https://news.example.com/img/a.gif": "image"}
    assert "in-script" not in extraction.text


@pytest.mark.parametrize("body", [b"", b"   \n\t ", b"<!-- only a comment -->"])
def test_it_returns_an_empty_extraction_for_an_empty_page(body):
    assert extract_html(body, PAGE_URL) == Extraction()


def test_it_stops_at_max_links_in_document_order():
    anchors = "".join(f'<a href="/p/{i}">page {i}</a>' for i in range(100_000))
    extraction = extract_html(f"<html><body>{anchors}</body></html>".encode(), "http://example.com/", max_links=5000)
    assert len(extraction.links) == 5000
    assert extraction.links[0].url == "http://example.com/p/0"
    assert extraction.links[-1].url == "http://example.com/p/4999"


def test_it_counts_distinct_links_towards_max_links():
    body = b'<a href="/a">a</a><a href="/a#x">a</a><a href="/b">b</a><a href="/c">c</a>'
    assert urls_of(extract_html(body, "http://example.com/", max_links=2)) == [
        "http://example.com/a",
        "http://example.com/b",
    ]


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("/a?b=1#frag", "http://example.com/a?b=1"),
        ("//cdn.example.org/x", "http://cdn.example.org/x"),
        ("HTTPS://Example.com/Y", "HTTPS://Example.com/Y"),  # canonicalize lowercases it later
        ("  spaced.html ", "http://example.com/dir/spaced.html"),
        ("#only-fragment", None),
        ("", None),
        ("mailto:x@example.com", None),
        ("data:image/png;base64,AAAA", None),
        ("https:///host", "https://host"),  # a browser ignores the extra slash
        ("https://", None),
        ("http://[::1/bad", None),
    ],
)
def test_it_resolves_hrefs_to_absolute_http_urls_or_none(href, expected):
    assert absolute_http_url("http://example.com/dir/page.html", href) == expected


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("\\products\\a.html", "http://example.com/products/a.html"),
        ("\\\\host.example\\x", "http://host.example/x"),
        ("http:\\\\host.example\\x", "http://host.example/x"),
        ("https:\\\\host.example\\x?q=\\", "https://host.example/x?q=\\"),  # the query keeps its own
        ("sub\\b.html", "http://example.com/dir/sub/b.html"),
        ("///host.example/x", "http://host.example/x"),
        ("http:///host.example/x", "http://host.example/x"),
        ("https:host.example/x", "https://host.example/x"),  # another scheme than the page's
        ("https:/host.example/x", "https://host.example/x"),
        ("http:same-scheme.html", "http://example.com/dir/same-scheme.html"),  # the page's scheme: relative
        ("http:/from-root.html", "http://example.com/from-root.html"),
        ("////", None),
    ],
)
def test_it_reads_backslashes_and_slashes_before_a_host_like_a_browser(href, expected):
    assert absolute_http_url("http://example.com/dir/page.html", href) == expected


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://e.com/a.JPG?w=1", "image"),
        ("http://e.com/v/clip.m3u8", "video"),
        ("http://e.com/a.opus", "audio"),
        ("http://e.com/report.pdf", None),
        ("http://e.com/jpg", None),
    ],
)
def test_it_tells_media_kinds_by_path_extension(url, kind):
    assert media_kind_of(url) == kind


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        ("text/html", b"", True),
        ("application/xhtml+xml", b"", True),
        ("application/pdf", b"<html>", False),
        ("", b"  <!DOCTYPE html><html>", True),
        ("", b"<html lang=en>", True),
        ("", b"%PDF-1.7", False),
    ],
)
def test_it_tells_html_from_content_type_or_sniffing(content_type, body, expected):
    assert looks_like_html(content_type, body) is expected


_markup = st.sampled_from(
    [
        b"<a href='",
        b"<a href=",
        b"'>",
        b"</a>",
        b"<img src='",
        b"<img srcset='",
        b"<base href='",
        b"<video src='",
        b"<picture><source srcset='",
        b"<audio><source src='",
        b"http://",
        b"https://h.example/",
        b"//x",
        b"#",
        b"?",
        b"javascript:",
        b"mailto:",
        b"\\",
        b"[",
        b"]",
        b":",
        b",",
        b" ",
        b" 2x, ",
        b"a.mp4",
        b"b.jpg",
        b"..",
        b"%",
        b"<meta charset='",
        b"shift_jis",
        b"utf-16",
        b"<html>",
        b"<!--",
        b"<title>",
        b"<script>",
        b"\x00",
        b"\xff\xfe",
        b"\xef\xbb\xbf",
        b"<?xml version='1.0' encoding='utf-8'?>",
        b"\xe9",
        b"\x82\xa0",
        b"\n",
    ]
)
_bodies = st.one_of(
    st.binary(max_size=400), st.lists(st.one_of(_markup, st.binary(max_size=4)), max_size=40).map(b"".join)
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    _bodies,
    st.sampled_from([None, "utf-8", "utf_8", "shift_jis", "windows-1252", "latin_1", "utf-16", "no-such-charset"]),
)
def test_it_never_raises_and_returns_only_absolute_http_urls_without_fragments(body, charset):
    extraction = extract_html(body, "http://base.example/dir/page.html", charset=charset)
    for url in [link.url for link in extraction.links] + [ref.url for ref in extraction.media]:
        parts = urlsplit(url)
        assert parts.scheme in ("http", "https")
        assert parts.hostname
        assert "#" not in url


def test_it_reads_canonical_headings_opengraph_and_json_ld():
    body = b"""<html><head><link rel="Canonical" href="/story?id=7">
    <meta property="og:title" content="Park approved"><meta property="og:image" content="/og.jpg">
    <script type="application/ld+json">{"@type": "NewsArticle", "headline": "Park"}</script>
    <script type="application/ld+json">{not json</script></head>
    <body><h1>Park</h1><h2>Budget</h2><h3> Vote </h3></body></html>"""
    page = extract_html(body, "https://news.example.com/a/b")
    assert page.canonical == "https://news.example.com/story?id=7"
    assert page.headings == [{"level": 1, "text": "Park"}, {"level": 2, "text": "Budget"}, {"level": 3, "text": "Vote"}]
    assert page.opengraph == {"og:title": "Park approved", "og:image": "/og.jpg"}
    assert page.json_ld == [{"@type": "NewsArticle", "headline": "Park"}]
    assert ("https://news.example.com/og.jpg", "image") in [(m.url, m.kind) for m in page.media]


_BASES = st.sampled_from(
    [
        "http://example.com/dir/page.html",
        "http://example.com/dir/other.html;p?q",
        "http://example.com/dir/",
        "http://example.com/dir/sub/../x.html",
        "http://example.com//double/x",
        "http://example.com/other/deeper/",
        "https://example.com/dir/page.html?q=1#f",
        "http://other.test:8080/a;p?x",
        "https://user@example.com/",
        "http://[::1]/x",
        "http://[bad/x",
        "ftp://example.com/dir/",
        "http://example.com",
    ]
)
_HREF_PARTS = st.sampled_from(
    [
        "/",
        "//",
        "http://",
        "https://",
        "h.test",
        "a",
        "..",
        ".",
        "?",
        "#",
        ";",
        ":",
        "\t",
        "\n",
        " ",
        "[",
        "%2F",
        "é",
        "x.html",
    ]
)


@settings(max_examples=300)
@given(st.lists(st.tuples(_BASES, st.lists(_HREF_PARTS, min_size=1, max_size=6).map("".join)), min_size=1, max_size=30))
def test_a_remembered_resolution_is_the_one_urljoin_gives_for_this_base(pairs):
    """The resolution cache keys on the base's scheme and host only for hrefs that depend on nothing
    else: every answer, cached or not, is the uncached one, whatever base asked first."""
    from core import hrefs

    for base, href in pairs + pairs[::-1]:
        stripped = href.strip()
        read = hrefs.browser_href(base, stripped) if stripped else None
        expected = None if not read or stripped.startswith("#") else hrefs._absolute_http_url(base, read)
        assert absolute_http_url(base, href) == expected, (base, href)


def _resolved_by_urlsplit(base: str, href: str) -> str | None:
    """The resolution as the standard library spells it, the reference for _absolute_http_url."""
    from urllib.parse import urldefrag, urljoin

    try:
        url = urldefrag(urljoin(base, href))[0]
        parts = urlsplit(url)
    except ValueError:
        return None
    return url if parts.scheme in ("http", "https") and parts.hostname else None


_AUTHORITY_PARTS = st.sampled_from(
    ["http://", "https://", "HTTP://", "ftp://", "h.test", "H.Test", "u@", ":", ":80", "[::1]", "[", "]", "%41",
     "\\", "\t", "\x00", " ", "é", "/", "?", "#", "x", ".."]
)  # fmt: skip


@settings(max_examples=1000)
@given(_BASES, st.lists(_AUTHORITY_PARTS | _HREF_PARTS, min_size=1, max_size=7).map("".join))
@example("http://example.com/dir/page.html", "https://\t/x")  # urljoin returns another scheme's URL as it is
@example("https://example.com/", "HTTP://u@h.test:80/x#f")
@example("http://example.com/", "https://h.test:99999/x")
@example("http://example.com/", "https://:80/x")
@example("http://example.com/", "https://h.test:8:0/x")
@example("http://example.com/dir/page.html", "http://")  # no host: urljoin keeps the base's
@example("http://[bad/x", "http://http://")  # urljoin refuses the base whatever the href
@example("http://example.com/dir/page.html", "http:///x")
@example("http://example.com/dir/page.html", "/a/./b/../c?x=/../")
@example("http://example.com/dir/page.html", "/a;p?")
@example("http://example.com/dir/page.html", "/a?")
def test_its_resolution_is_urljoin_then_urldefrag_then_urlsplits_verdict(base, href):
    from core import hrefs

    assert hrefs._absolute_http_url(base, href) == _resolved_by_urlsplit(base, href), (base, href)


@pytest.mark.parametrize(
    "href", ["//", "//?q", "///x", "http://", "http:///x", "http://?q", "?q", "a/b", "./", "/x", "//h/x"]
)
def test_hrefs_that_read_the_base_path_are_resolved_per_base(href):
    from core import hrefs

    for base in ("http://example.com/one/page.html?a", "http://example.com/two/"):
        read = hrefs.browser_href(base, href)
        assert absolute_http_url(base, href) == (read and hrefs._absolute_http_url(base, read))


_LINK_MARKUP = st.lists(
    st.sampled_from(
        [
            '<a href="/a.html">plain</a>',
            '<a href="b.html">  spaced \n\t text  </a>',
            '<a href="/c.html"><b>bold</b> and <i>italic\u00a0</i></a>',
            '<area href="/map.html">',
            "<a>no href</a>",
            '<a href="/d.html" rel="NoFollow">nofollow</a>',
            '<a href="mailto:x@example.com">mail</a>',
            '<a href="/a.html">repeated</a>',
            '<a href="/e.html">\u2003em\u2003space\u3000ideographic</a>',
            "</html><p>after the end",
            '<meta name="ROBOTS" content="noindex, NOFOLLOW">',
        ]
    ),
    max_size=25,
)


@given(_LINK_MARKUP)
@settings(max_examples=200)
def test_its_links_are_those_of_the_xpath_union_with_their_collapsed_text(parts):
    """The links found by walking the tree (and the root's siblings) are the links of
    "//a[@href] | //area[@href]" in document order, with text_content() collapsed by \\s+."""
    import re

    import lxml.html

    html = f"<html><body>{''.join(parts)}</body></html>".encode()
    extraction = extract_html(html, PAGE_URL)
    doc = lxml.html.document_fromstring(html, parser=lxml.html.HTMLParser(remove_comments=True))
    nofollow_page = bool(re.search("(?i)nofollow", " ".join(doc.xpath("//meta/@content"))))
    expected, seen = [], set()
    for el in doc.xpath("//a[@href] | //area[@href]"):
        url = absolute_http_url(PAGE_URL, el.get("href"))
        if url and url not in seen:
            seen.add(url)
            nofollow = nofollow_page or "nofollow" in (el.get("rel") or "").lower()
            expected.append((url, re.sub(r"\s+", " ", el.text_content()).strip(), nofollow))
    assert [(link.url, link.text, link.nofollow) for link in extraction.links] == expected


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://h.test/a.JPG?size=2", "image"),
        ("http://h.test/a.jp\tg", "image"),  # urlsplit drops the tab before it reads the path
        ("http://h.test/a?file=b.jpg", None),
        ("http://h.test/a#b.mp4", None),
        ("http://h.test/v/clip.m3u8", "video"),
        ("http://h.test/page.html", None),
    ],
)
def test_a_links_media_kind_is_read_from_its_path(url, kind):
    assert media_kind_of(url) == kind


def text_of(html: bytes) -> str:
    return extract_html(html, "https://docs.example/").text


def test_it_separates_blocks_and_keeps_inline_words_whole():
    html = b"<h1>Title</h1><p>First para.</p><p>Second</p><ul><li>one</li><li>two</li></ul>"
    assert text_of(html) == "Title\nFirst para.\nSecond\none\ntwo"
    assert text_of(b"<p>wo<b>rd</b></p>") == "word"


def test_it_keeps_the_word_boundaries_of_a_documentation_page():
    assert text_of(DOCS_PAGE).split("\n") == [
        "Home | Guide",
        "Installing crawlhub",
        "Install it with pip, then run the migrate command.",
        "Requirements",
        "Python 3.11",
        "PostgreSQL",
        "16 or newer",
        "Clone",
        "Configure",
        "Setting Default",
        "CRAWL_MAX_ATTEMPTS 3",
        "min_delay 0.0",
        "make migrate",
        "make serve",
        "Seed",
        "A start URL.",
        "Be polite.",
        "Last updated: today",
        "\u00a9 crawlhub",
    ]
