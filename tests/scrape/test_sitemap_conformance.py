"""Sitemaps and feeds held to the cases of Scrapy's sitemap tests (tests/test_utils_sitemap.py and
tests/test_spider_sitemap.py) and ultimate-sitemap-parser's edge cases. Pure: no database, no network.

Each case is a body as a server sends it (with its URL and Content-Type) and what the peer reads
from it, written as the Listing crawlhub would return for that reading. crawlhub reads every listing
through scrape.sitemaps.parse_listing, so that is what is checked. Where crawlhub reads it otherwise
on purpose, DIFFERENT pins crawlhub's Listing and says why (docs/crawling.md lists the differences).
"""

import gzip
from datetime import UTC, datetime

import pytest

from core.robots import policy_from_response, robots_text
from scrape.sitemaps import Discovered, Listing, parse_listing, parse_sitemap

XML = b'<?xml version="1.0" encoding="UTF-8"?>\n'
NS = b'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
ATOM = b'xmlns="http://www.w3.org/2005/Atom"'


def at(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def pages(*urls, lastmod=None) -> Listing:
    return Listing("urlset", urls=[Discovered(url, lastmod) for url in urls])


def feed(*urls) -> Listing:
    return Listing("feed", urls=[Discovered(url) if isinstance(url, str) else Discovered(*url) for url in urls])


SCRAPY_URLSET = (
    XML + b'<urlset xmlns="http://www.google.com/schemas/sitemap/0.84">\n'
    b"  <url>\n    <loc>http://www.example.com/</loc>\n    <lastmod>2009-08-16</lastmod>\n"
    b"    <changefreq>daily</changefreq>\n    <priority>1</priority>\n  </url>\n"
    b"  <url>\n    <loc>http://www.example.com/Special-Offers.html</loc>\n    <lastmod>2009-08-16</lastmod>\n"
    b"    <changefreq>weekly</changefreq>\n    <priority>0.8</priority>\n  </url>\n</urlset>"
)
SCRAPY_INDEX = (
    XML + b'<sitemapindex xmlns="http://www.google.com/schemas/sitemap/0.84">\n'
    b"   <sitemap>\n      <loc>http://www.example.com/sitemap1.xml.gz</loc>\n"
    b"      <lastmod>2004-10-01T18:23:17+00:00</lastmod>\n   </sitemap>\n"
    b"   <sitemap>\n      <loc>http://www.example.com/sitemap2.xml.gz</loc>\n"
    b"      <lastmod>2005-01-01</lastmod>\n   </sitemap>\n</sitemapindex>"
)
STRIPPED_ENTRIES = (
    b"  <url%s>\n    <loc> http://www.example.com/</loc>\n    <lastmod>2009-08-16</lastmod>\n"
    b"    <changefreq>daily</changefreq>\n    <priority>1</priority>\n  </url>\n"
    b"  <url%s>\n    <loc> http://www.example.com/2</loc>\n    <lastmod />\n  </url>\n"
)
ALTERNATES = (
    XML + b"<urlset " + NS + b'\n    xmlns:xhtml="http://www.w3.org/1999/xhtml">\n    <url>\n'
    b"        <loc>http://www.example.com/english/</loc>\n"
    b'        <xhtml:link rel="alternate" hreflang="de" href="http://www.example.com/deutsch/"/>\n'
    b'        <xhtml:link rel="alternate" hreflang="de-ch" href="http://www.example.com/schweiz-deutsch/"/>\n'
    b'        <xhtml:link rel="alternate" hreflang="it" href="http://www.example.com/italiano/"/>\n'
    b'        <xhtml:link rel="alternate" hreflang="it"/><!-- wrong tag without href -->\n'
    b"    </url>\n</urlset>"
)
ENTITY_EXPANSION = (
    XML + b'<!DOCTYPE foo [\n<!ELEMENT foo ANY >\n<!ENTITY xxe SYSTEM "file:///etc/passwd" >\n]>\n'
    b"<urlset " + NS + b">\n<url>\n<loc>http://127.0.0.1:8000/&xxe;</loc>\n</url>\n</urlset>"
)
FILTERABLE = (
    XML + b"<urlset " + NS + b">\n"
    b"    <url><loc>http://www.example.com/english/</loc><lastmod>2010-01-01</lastmod></url>\n"
    b"    <url><loc>http://www.example.com/portuguese/</loc><lastmod>2005-01-01</lastmod></url>\n</urlset>"
)
FILTERABLE_INDEX = (
    XML + b"<sitemapindex " + NS + b">\n"
    b"    <sitemap><loc>http://www.example.com/sitemap1.xml</loc>"
    b"<lastmod>2004-01-01T20:00:00+00:00</lastmod></sitemap>\n"
    b"    <sitemap><loc>http://www.example.com/sitemap2.xml</loc><lastmod>2005-01-01</lastmod></sitemap>\n"
    b"</sitemapindex>"
)
SMALL = XML + b"<urlset " + NS + b"><url><loc>http://www.example.com/</loc></url></urlset>"
TWO_WHOLE = (
    b"<urlset " + NS + b"><url><loc>http://www.example.com/a</loc></url><url><loc>http://www.example.com/b</loc></url>"
)
RSS_EMPTY = b'<?xml version="1.0"?><rss version="2.0"><channel><title>Quiet</title><link>http://q.example/</link></channel></rss>'

E = "http://www.example.com"
# (case, body, url the body came from, Content-Type, what the peer reads, as a Listing)
CASES = [
    # Scrapy tests/test_utils_sitemap.py
    (
        "scrapy sitemap",
        SCRAPY_URLSET,
        E + "/sitemap.xml",
        "text/xml",
        pages(E + "/", E + "/Special-Offers.html", lastmod=at(2009, 8, 16)),
    ),
    (
        "scrapy sitemap_index",
        SCRAPY_INDEX,
        E + "/sitemap.xml",
        "text/xml",
        Listing(
            "sitemapindex",
            sitemaps=[
                Discovered(E + "/sitemap1.xml.gz", at(2004, 10, 1, 18, 23, 17)),
                Discovered(E + "/sitemap2.xml.gz", at(2005, 1, 1)),
            ],
        ),
    ),
    (
        "scrapy sitemap_strip",
        XML
        + b'<urlset xmlns="http://www.google.com/schemas/sitemap/0.84">\n'
        + STRIPPED_ENTRIES % (b"", b"")
        + b"</urlset>",
        E + "/sitemap.xml",
        "text/xml",
        Listing("urlset", urls=[Discovered(E + "/", at(2009, 8, 16)), Discovered(E + "/2")]),
    ),
    (
        "scrapy sitemap_wrong_ns",
        XML
        + b'<urlset xmlns="http://www.google.com/schemas/sitemap/0.84">\n'
        + STRIPPED_ENTRIES % (b' xmlns=""', b' xmlns=""')
        + b"</urlset>",
        E + "/sitemap.xml",
        "text/xml",
        Listing("urlset", urls=[Discovered(E + "/", at(2009, 8, 16)), Discovered(E + "/2")]),
    ),
    (
        "scrapy sitemap_wrong_ns2",
        XML + b"<urlset>\n" + STRIPPED_ENTRIES % (b' xmlns=""', b' xmlns=""') + b"</urlset>",
        E + "/sitemap.xml",
        "text/xml",
        Listing("urlset", urls=[Discovered(E + "/", at(2009, 8, 16)), Discovered(E + "/2")]),
    ),
    (
        "scrapy sitemap_blanklines",
        b"\n\n"
        + XML
        + b"<sitemapindex "
        + NS
        + b">\n\n"
        + b"".join(
            b"<sitemap>\n<loc>http://www.example.com/sitemap%d.xml</loc>\n<lastmod>2013-07-15</lastmod>\n"
            b"</sitemap>\n\n" % i
            for i in (1, 2, 3)
        )
        + b"</sitemapindex>\n",
        E + "/sitemap.xml",
        "text/xml",
        Listing("sitemapindex", sitemaps=[Discovered(E + f"/sitemap{i}.xml", at(2013, 7, 15)) for i in (1, 2, 3)]),
    ),
    (
        "scrapy comment",
        XML + b"<urlset " + NS + b' xmlns:xhtml="http://www.w3.org/1999/xhtml">\n    <url>\n'
        b"        <loc>http://www.example.com/</loc>\n        <!-- this is a comment on which the parser might "
        b"raise an exception if implemented incorrectly -->\n    </url>\n</urlset>",
        E + "/sitemap.xml",
        "text/xml",
        pages(E + "/"),
    ),
    (
        "scrapy alternate",
        ALTERNATES,
        E + "/sitemap.xml",
        "text/xml",
        pages(E + "/english/", E + "/deutsch/", E + "/schweiz-deutsch/", E + "/italiano/"),
    ),
    ("scrapy xml_entity_expansion", ENTITY_EXPANSION, E + "/sitemap.xml", "text/xml", pages("http://127.0.0.1:8000/")),
    # Scrapy tests/test_spider_sitemap.py: which responses are read as sitemaps, and what they give
    ("scrapy body of an XML response", SMALL, E + "/sitemap", "application/xml", pages(E + "/")),
    ("scrapy body of a .xml URL served as text", SMALL, E + "/sitemap.xml", "text/plain", pages(E + "/")),
    ("scrapy body gzipped, by Content-Type", gzip.compress(SMALL), E + "/sitemap", "application/gzip", pages(E + "/")),
    ("scrapy body gzipped, by .xml.gz URL", gzip.compress(SMALL), E + "/sitemap.xml.gz", "", pages(E + "/")),
    (
        "scrapy body of a non-sitemap URL",
        SMALL,
        E + "/favicon.ico",
        "image/x-icon",
        Listing("unknown", error="not_a_listing"),
    ),
    ("scrapy alternate_url_locs, by default", ALTERNATES, E + "/sitemap.xml", "text/xml", pages(E + "/english/")),
    (
        "scrapy sitemap_filter: every entry and its lastmod",
        FILTERABLE,
        E + "/sitemap.xml",
        "text/xml",
        Listing(
            "urlset", urls=[Discovered(E + "/english/", at(2010, 1, 1)), Discovered(E + "/portuguese/", at(2005, 1, 1))]
        ),
    ),
    (
        "scrapy sitemapindex_filter: every child and its lastmod",
        FILTERABLE_INDEX,
        E + "/sitemap.xml",
        "text/xml",
        Listing(
            "sitemapindex",
            sitemaps=[
                Discovered(E + "/sitemap1.xml", at(2004, 1, 1, 20)),
                Discovered(E + "/sitemap2.xml", at(2005, 1, 1)),
            ],
        ),
    ),
    # ultimate-sitemap-parser's edge cases (and the truncated, BOM and empty-feed cases)
    (
        "truncated inside a loc",
        TWO_WHOLE + b"<url><loc>http://www.example.com/pro",
        E + "/s.xml",
        "",
        pages(E + "/a", E + "/b"),
    ),
    (
        "truncated inside a lastmod",
        TWO_WHOLE + b"<url><loc>http://www.example.com/c</loc><lastmod>20",
        E + "/s.xml",
        "",
        pages(E + "/a", E + "/b"),
    ),
    ("truncated between entries", TWO_WHOLE + b"\n", E + "/s.xml", "", pages(E + "/a", E + "/b")),
    (
        "truncated, gzipped whole",
        gzip.compress(TWO_WHOLE + b"<url><lo"),
        E + "/s.xml.gz",
        "",
        pages(E + "/a", E + "/b"),
    ),
    (
        "truncated index",
        b"<sitemapindex><sitemap><loc>/s1.xml</loc></sitemap><sitemap><loc>/s2",
        E + "/i.xml",
        "",
        Listing("sitemapindex", sitemaps=[Discovered(E + "/s1.xml")]),
    ),
    (
        "truncated before any whole entry",
        b"<urlset><url><loc>http://www.example.com/a",
        E + "/s.xml",
        "",
        Listing("unknown", error="malformed"),
    ),
    (
        "unescaped ampersand",
        b"<urlset><url><loc>http://www.example.com/p?a=1&b=2</loc></url></urlset>",
        E + "/s.xml",
        "",
        pages(E + "/p?a=1&b=2"),
    ),
    ("UTF-8 byte order mark", b"\xef\xbb\xbf" + SMALL, E + "/s.xml", "application/xml", pages(E + "/")),
    (
        "UTF-16 with its byte order mark",
        SMALL.replace(b"UTF-8", b"UTF-16").decode().encode("utf-16"),
        E + "/s.xml",
        "application/xml",
        pages(E + "/"),
    ),
    ("whitespace before the declaration", b"  \r\n\t" + SMALL, E + "/s.xml", "", pages(E + "/")),
    ("gzip named .gz but plain", SMALL, E + "/sitemap.xml.gz", "application/x-gzip", pages(E + "/")),
    ("gzip named .xml but gzipped", gzip.compress(SMALL), E + "/sitemap.xml", "text/xml", pages(E + "/")),
    ("gzip served as text/html", gzip.compress(SMALL), E + "/sitemap.xml", "text/html", pages(E + "/")),
    ("relative loc", b"<urlset><url><loc>/a/b.html</loc></url></urlset>", E + "/dir/s.xml", "", pages(E + "/a/b.html")),
    (
        "loc with only whitespace",
        b"<urlset><url><loc> \n </loc></url><url><loc>/x</loc></url></urlset>",
        E + "/s.xml",
        "",
        pages(E + "/x"),
    ),
    (
        "loc in CDATA",
        b"<urlset><url><loc><![CDATA[http://www.example.com/a?b=1&c=2]]></loc></url></urlset>",
        E + "/s.xml",
        "",
        pages(E + "/a?b=1&c=2"),
    ),
    (
        "escaped ampersand",
        b"<urlset><url><loc>http://www.example.com/a?b=1&amp;c=2</loc></url></urlset>",
        E + "/s.xml",
        "",
        pages(E + "/a?b=1&c=2"),
    ),
    (
        "non-http loc",
        b"<urlset><url><loc>ftp://www.example.com/a</loc></url><url><loc>/ok</loc></url></urlset>",
        E + "/s.xml",
        "",
        pages(E + "/ok"),
    ),
    (
        "repeated loc",
        b"<urlset><url><loc>/a</loc></url><url><loc>/a</loc></url></urlset>",
        E + "/s.xml",
        "",
        pages(E + "/a"),
    ),
    (
        "news extension",
        b'<urlset xmlns:news="http://www.google.com/schemas/sitemap-news/0.9"><url><loc>/n</loc>'
        b"<news:news><news:publication_date>2024-03-01T10:00:00Z</news:publication_date></news:news></url></urlset>",
        E + "/s.xml",
        "",
        pages(E + "/n"),
    ),
    (
        "image extension: the page, not the image",
        b'<urlset xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'
        b"<url><image:image><image:loc>/i.jpg</image:loc></image:image><loc>/p</loc></url></urlset>",
        E + "/s.xml",
        "",
        pages(E + "/p"),
    ),
    (
        "lastmod with a date only",
        b"<urlset><url><loc>/a</loc><lastmod>2024-03-01</lastmod></url></urlset>",
        E + "/s.xml",
        "",
        pages(E + "/a", lastmod=at(2024, 3, 1)),
    ),
    (
        "lastmod with an offset",
        b"<urlset><url><loc>/a</loc><lastmod>2024-03-01T12:00:00+02:00</lastmod></url></urlset>",
        E + "/s.xml",
        "",
        pages(E + "/a", lastmod=at(2024, 3, 1, 10)),
    ),
    (
        "lastmod unreadable",
        b"<urlset><url><loc>/a</loc><lastmod>yesterday</lastmod></url></urlset>",
        E + "/s.xml",
        "",
        pages(E + "/a"),
    ),
    (
        "text sitemap",
        b"http://www.example.com/a\nhttp://www.example.com/b\n",
        E + "/s.txt",
        "text/plain",
        Listing("text", urls=[Discovered(E + "/a"), Discovered(E + "/b")]),
    ),
    (
        "text sitemap with a byte order mark and blank lines",
        b"\xef\xbb\xbf\nhttp://www.example.com/a\r\n\r\nhttp://www.example.com/b\n",
        E + "/s.txt",
        "text/plain",
        Listing("text", urls=[Discovered(E + "/a"), Discovered(E + "/b")]),
    ),
    (
        "text sitemap: only absolute URLs",
        b"http://www.example.com/a\n/relative\nnot a url\n",
        E + "/s.txt",
        "text/plain",
        Listing("text", urls=[Discovered(E + "/a")]),
    ),
    ("empty body", b"", E + "/s.xml", "text/xml", Listing("unknown", error="not_a_listing")),
    (
        "HTML page",
        b"<!doctype html><html><body><a href='/x'>x</a></body></html>",
        E + "/s.xml",
        "text/html",
        Listing("unknown", error="not_a_listing"),
    ),
    # Feeds (ultimate-sitemap-parser reads RSS 0.9x/1.0/2.0 and Atom 0.3/1.0 as sitemaps)
    ("empty RSS 2.0 feed", RSS_EMPTY, E + "/feed", "application/rss+xml", Listing("feed")),
    ("empty RSS 2.0 feed without a type", RSS_EMPTY, E + "/feed", "", Listing("feed")),
    (
        "empty Atom feed",
        b"<feed " + ATOM + b"><title>Quiet</title><id>urn:q</id></feed>",
        E + "/feed",
        "application/atom+xml",
        Listing("feed"),
    ),
    (
        "RSS 2.0",
        b'<rss version="2.0"><channel><item><link>http://www.example.com/a</link>'
        b"<pubDate>Tue, 05 Mar 2024 08:15:00 GMT</pubDate></item></channel></rss>",
        E + "/feed",
        "application/rss+xml",
        feed((E + "/a", at(2024, 3, 5, 8, 15))),
    ),
    (
        "RSS 0.91",
        b'<rss version="0.91"><channel><title>t</title><item><title>a</title><link>http://www.example.com/a'
        b"</link></item></channel></rss>",
        E + "/feed",
        "text/xml",
        feed(E + "/a"),
    ),
    (
        "RSS 1.0",
        b'<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/">'
        b'<item rdf:about="http://www.example.com/a"><title>a</title><link>http://www.example.com/a</link></item>'
        b"</rdf:RDF>",
        E + "/feed",
        "application/rdf+xml",
        feed(E + "/a"),
    ),
    (
        "Atom 1.0 with a relative link",
        b"<feed " + ATOM + b'><entry><link href="/a"/><updated>2024-03-06T09:00:00Z</updated></entry></feed>',
        E + "/f/feed",
        "application/atom+xml",
        feed((E + "/a", at(2024, 3, 6, 9))),
    ),
    (
        "Atom 0.3",
        b'<feed version="0.3" xmlns="http://purl.org/atom/ns#"><entry><link rel="alternate" type="text/html"'
        b' href="http://www.example.com/a"/></entry></feed>',
        E + "/feed",
        "application/atom+xml",
        feed(E + "/a"),
    ),
    (
        "feed served as text/html",
        RSS_EMPTY.replace(b"</channel>", b"<item><link>http://www.example.com/a</link></item></channel>"),
        E + "/feed",
        "text/html",
        feed(E + "/a"),
    ),
    (
        "truncated feed",
        b'<rss version="2.0"><channel><item><link>http://www.example.com/a</link></item><item><li',
        E + "/feed",
        "application/rss+xml",
        feed(E + "/a"),
    ),
]

# case -> (crawlhub's Listing, why)
DIFFERENT = {
    "scrapy alternate": (
        pages(E + "/english/"),
        "hreflang alternates (xhtml:link) are not read: they are the same page in other languages, often "
        "on other hosts; SitemapSpider follows them only with sitemap_alternate_links, off by default",
    ),
    "scrapy xml_entity_expansion": (
        Listing("unknown", error="unsafe_xml"),
        "a document that declares entities is refused whole (billion laughs, XXE), not read without them",
    ),
    "scrapy body of a non-sitemap URL": (
        pages(E + "/"),
        "listings are recognised by their bytes, not their URL or Content-Type: servers label sitemaps as "
        "text/plain, octet-stream or text/html often enough",
    ),
}


@pytest.mark.parametrize(("case", "body", "url", "content_type", "peer"), CASES, ids=[case[0] for case in CASES])
def test_it_reads_listings_as_the_peers_do_or_as_pinned(case, body, url, content_type, peer):
    expected, why = DIFFERENT.get(case, (peer, ""))
    assert parse_listing(body, base_url=url, content_type=content_type) == expected, why or "the peer's reading"


def test_every_pinned_difference_is_a_case_and_differs_from_the_peer():
    peers = {case: peer for case, _, _, _, peer in CASES}
    assert len(peers) == len(CASES)
    for case, (ours, _) in DIFFERENT.items():
        assert ours != peers[case]


# Scrapy test_sitemap_urls_from_robots and test_get_sitemap_urls_from_robotstxt: Sitemap lines of
# robots.txt, relative ones resolved against the robots.txt URL.
ROBOTS = b"""User-agent: *
Disallow: /aff/
Disallow: /wl/

# Search and shopping refining
Disallow: /s*/*facet
Disallow: /s*/*tags

# Sitemap files
Sitemap: http://example.com/sitemap.xml
Sitemap: http://example.com/sitemap-product-index.xml
Sitemap: HTTP://example.com/sitemap-uppercase.xml
Sitemap: /sitemap-relative-url.xml

# Forums
Disallow: /forum/search/
Disallow: /forum/active/
"""


@pytest.mark.parametrize(
    ("robots_url", "relative"),
    [
        ("http://example.com/robots.txt", "http://example.com/sitemap-relative-url.xml"),
        ("http://www.example.com/robots.txt", "http://www.example.com/sitemap-relative-url.xml"),
    ],
)
def test_it_lists_the_sitemaps_of_robots_txt_as_scrapy_does(robots_url, relative):
    policy = policy_from_response(200, robots_text(ROBOTS))
    assert policy.sitemaps(robots_url) == [
        "http://example.com/sitemap.xml",
        "http://example.com/sitemap-product-index.xml",
        "http://example.com/sitemap-uppercase.xml",
        relative,
    ]


# Scrapy test_compression_bomb_*: a gzip body past the size limit gives nothing.
def test_it_refuses_a_gzip_body_that_inflates_past_the_cap():
    bomb = gzip.compress(b" " * 11_000_000)
    assert parse_sitemap(bomb, base_url=E + "/s.xml.gz", max_bytes=10_000_000) == Listing("unknown", error="too_large")


# Deliberate choices, pinned.


def test_a_sitemap_that_only_mentions_an_entity_declaration_in_a_comment_is_refused_whole():
    """Entities are refused by a search of the bytes, which cannot tell a comment from a DTD: a sitemap
    that mentions one in a comment is rare, and a parser that reads comments first is one more
    parser to trust with hostile input."""
    body = b"<urlset><!-- no <!ENTITY here --><url><loc>http://www.example.com/a</loc></url></urlset>"
    assert parse_listing(body, base_url=E + "/s.xml") == Listing("unknown", error="unsafe_xml")


def test_a_gzipped_sitemap_inflates_past_the_fetch_cap_up_to_the_protocols_50_mib():
    """CRAWL_MAX_BODY_BYTES (10 MiB) caps what is fetched; a .xml.gz file served without
    Content-Encoding is inflated here, up to the sitemap protocol's 50 MB, so a 20 MB sitemap is read
    when it is gzipped (as large sitemaps are) and fails body_too_large when served plain."""
    entries = b"".join(b"<url><loc>http://www.example.com/%s/%d</loc></url>\n" % (b"p" * 360, i) for i in range(50_000))
    body = gzip.compress(b"<urlset>" + entries + b"</urlset>")
    assert len(body) < 10 * 1024 * 1024 < 20_000_000 < len(entries)
    listing = parse_listing(body, base_url=E + "/s.xml.gz")
    assert (listing.kind, listing.error, len(listing.urls)) == ("urlset", "", 50_000)


def test_an_unclosed_url_with_an_undeclared_entity_lists_nothing_and_raises_nothing():
    """Scrapy's test_sitemap_non_string_tag: `<url>&k;` once crashed a recovering parser."""
    listing = parse_listing(b"<url>&k;", base_url=E + "/sitemap.xml", content_type="application/xml")
    assert (listing.urls, listing.sitemaps, listing.error) == ([], [], "not_a_listing")
