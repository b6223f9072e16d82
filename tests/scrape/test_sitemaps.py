"""scrape.sitemaps: sitemaps, feeds and text listings from saved bytes. Pure: no database, no network."""

import codecs
import gzip
import socket
import time
import tracemalloc
import zlib
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from scrape.sitemaps import MAX_BYTES, Discovered, Listing, parse_feed, parse_listing, parse_sitemap

FIXTURES = Path(__file__).parents[1] / "fixtures" / "sitemaps"
BASE = "https://www.example.com/sitemap.xml"
PARSERS = [parse_sitemap, parse_feed, parse_listing]


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def urls_of(listing: Listing) -> list[str]:
    return [found.url for found in listing.urls]


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def billion_laughs(root: bytes) -> bytes:
    levels = [b'<!ENTITY lol0 "lol">'] + [
        b'<!ENTITY lol%d "%s">' % (i, b"&lol%d;" % (i - 1) * 10) for i in range(1, 10)
    ]
    return b'<?xml version="1.0"?><!DOCTYPE lolz [%s]>%s' % (b"".join(levels), root.replace(b"LOL", b"&lol9;"))


def gzip_bomb(decompressed_size: int) -> bytes:
    compressor, zeros = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS), bytes(1024 * 1024)
    chunks = [compressor.compress(zeros) for _ in range(decompressed_size // len(zeros))]
    return b"".join(chunks) + compressor.flush()


# Sitemaps


def test_it_reads_locs_and_lastmods_of_a_urlset():
    listing = parse_sitemap(fixture("urlset.xml"), base_url=BASE)
    assert listing.kind == "urlset"
    assert listing.error == ""
    assert listing.sitemaps == []
    assert listing.urls[:3] == [
        Discovered("https://www.example.com/", utc(2024, 3, 1)),
        Discovered("https://www.example.com/news/park-opens.html", utc(2024, 3, 2, 12, 30)),
        Discovered("https://www.example.com/about/team", utc(2024, 3, 3, 8, 0, 0, 250_000)),
    ]


def test_it_resolves_relative_locs_and_keeps_only_http_ones_once():
    listing = parse_sitemap(fixture("urlset.xml"), base_url=BASE)
    assert urls_of(listing) == [
        "https://www.example.com/",  # the second <url> with this loc is a duplicate
        "https://www.example.com/news/park-opens.html",  # stripped
        "https://www.example.com/about/team",
        "https://www.example.com/search?q=parks&page=2",  # &amp; unescaped, fragment dropped
        "https://www.example.com/events?month=4&year=2024",  # CDATA
    ]  # no mailto:, javascript:, ftp:, image:loc or xhtml:link, nor the <url> without a loc


def test_it_ignores_unreadable_lastmods_and_reads_partial_dates():
    lastmods = {found.url: found.lastmod for found in parse_sitemap(fixture("urlset.xml"), base_url=BASE).urls}
    assert lastmods["https://www.example.com/search?q=parks&page=2"] is None  # "yesterday"
    assert lastmods["https://www.example.com/events?month=4&year=2024"] == utc(2024, 4, 1)  # "2024-04"


def test_it_reads_the_children_of_a_sitemap_index():
    listing = parse_sitemap(fixture("sitemapindex.xml"), base_url=BASE)
    assert listing.kind == "sitemapindex"
    assert listing.urls == []
    assert listing.sitemaps == [
        Discovered("https://www.example.com/sitemaps/posts-1.xml.gz", utc(2024, 2, 29, 4, 59, 59)),
        Discovered("https://www.example.com/sitemaps/pages.xml"),
        Discovered("https://www.example.com/sitemaps/news.xml"),  # month 13 is no date
    ]


def test_it_is_lenient_about_namespaces_and_space_before_the_declaration():
    body = b'\n  <?xml version="1.0"?><sm:urlset xmlns:sm="urn:other"><sm:url><sm:loc>/a</sm:loc></sm:url></sm:urlset>'
    assert urls_of(parse_sitemap(body, base_url=BASE)) == ["https://www.example.com/a"]
    assert urls_of(parse_sitemap(b"<urlset><url><loc>/b</loc></url></urlset>", base_url=BASE)) == [
        "https://www.example.com/b"
    ]


@pytest.mark.parametrize("name", ["urlset.xml", "sitemapindex.xml"])
@pytest.mark.parametrize("parse", [parse_sitemap, parse_listing])
def test_it_reads_gzipped_sitemaps_by_their_magic_bytes(name, parse):
    plain = parse(fixture(name), base_url=BASE)
    assert parse(gzip.compress(fixture(name)), base_url=BASE) == plain


def test_it_reads_every_member_of_a_multi_member_gzip_and_ignores_trailing_padding():
    half = len(fixture("urlset.xml")) // 2
    body = gzip.compress(fixture("urlset.xml")[:half]) + gzip.compress(fixture("urlset.xml")[half:]) + bytes(8)
    assert parse_sitemap(body, base_url=BASE) == parse_sitemap(fixture("urlset.xml"), base_url=BASE)


@pytest.mark.parametrize("parse", PARSERS)
def test_it_reports_a_corrupt_or_truncated_gzip_as_bad_gzip(parse):
    body = gzip.compress(fixture("urlset.xml"))
    assert parse(body[: len(body) // 2], base_url=BASE).error == "bad_gzip"
    assert parse(body[:10] + b"\xff" * 20 + body[30:], base_url=BASE).error == "bad_gzip"


def test_it_reads_a_text_sitemap_one_absolute_url_per_line():
    listing = parse_sitemap(fixture("urls.txt"), base_url=BASE)
    assert listing.kind == "text"
    assert urls_of(listing) == [
        "https://www.example.com/",
        "https://www.example.com/products/chairs",
        "https://www.example.com/products/tables",
        "http://www.example.com/legacy?id=7",
    ]


@pytest.mark.parametrize("parse", [parse_sitemap, parse_listing])
def test_it_reports_xml_without_one_whole_entry_as_malformed(parse):
    body = b"<urlset><url><loc>https://www.example.com/a</lo"
    assert parse(body, base_url=BASE) == Listing("unknown", error="malformed")


@pytest.mark.parametrize("parse", [parse_sitemap, parse_listing])
@pytest.mark.parametrize(
    "cut", [b"<url><loc>https://www.example.com/pro", b"<url><loc>https://www.example.com/c</loc><lastmod>2024", b"<u"]
)
def test_it_keeps_the_whole_entries_of_a_truncated_sitemap(parse, cut):
    whole = b"<url><loc>https://www.example.com/a</loc></url><url><loc>https://www.example.com/b</loc></url>"
    body = b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">' + whole + cut
    listing = parse(body, base_url=BASE)
    assert (listing.kind, listing.error) == ("urlset", "")
    assert urls_of(listing) == ["https://www.example.com/a", "https://www.example.com/b"]


def test_it_keeps_the_whole_children_of_a_truncated_sitemap_index():
    body = b"<sitemapindex><sitemap><loc>/s1.xml</loc></sitemap><sitemap><loc>/s2.xml</loc></sitemap><sitemap><lo"
    listing = parse_sitemap(body, base_url=BASE)
    assert [found.url for found in listing.sitemaps] == [
        "https://www.example.com/s1.xml",
        "https://www.example.com/s2.xml",
    ]


@pytest.mark.parametrize("parse", [parse_sitemap, parse_listing])
def test_it_reads_a_sitemap_with_an_unescaped_ampersand_as_written(parse):
    body = (
        b"<urlset><url><loc>https://www.example.com/p?a=1&b=2</loc></url>"
        b"<url><loc>https://www.example.com/q?x=1&amp;y=2</loc></url>"
        b"<url><loc>https://www.example.com/r?c=3&d;e</loc></url></urlset>"
    )
    assert urls_of(parse(body, base_url=BASE)) == [
        "https://www.example.com/p?a=1&b=2",
        "https://www.example.com/q?x=1&y=2",
        "https://www.example.com/r?c=3&d;e",
    ]


@pytest.mark.parametrize("parse", [parse_sitemap, parse_listing])
def test_it_still_refuses_a_malformed_sitemap_that_declares_entities(parse):
    body = b'<!DOCTYPE u [<!ENTITY x "y">]><urlset><url><loc>https://www.example.com/&x;</loc></url><url><lo'
    assert parse(body, base_url=BASE) == Listing("unknown", error="unsafe_xml")


def test_it_keeps_only_the_first_max_urls():
    locs = b"".join(b"<url><loc>/page/%d</loc></url>" % i for i in range(100))
    listing = parse_sitemap(b"<urlset>%s</urlset>" % locs, base_url=BASE, max_urls=10)
    assert urls_of(listing) == [f"https://www.example.com/page/{i}" for i in range(10)]
    text = "\n".join(f"https://www.example.com/t/{i}" for i in range(100)).encode()
    assert len(parse_sitemap(text, base_url=BASE, max_urls=7).urls) == 7
    assert len(parse_feed(fixture("atom.xml"), base_url=BASE, max_urls=1).urls) == 1


def test_it_refuses_a_plain_body_over_max_bytes():
    assert parse_sitemap(fixture("urlset.xml"), base_url=BASE, max_bytes=100).error == "too_large"


# Feeds


def test_it_reads_rss2_item_links_guid_permalinks_and_pub_dates():
    listing = parse_feed(fixture("rss2.xml"), base_url="https://news.example.com/feed.xml")
    assert listing.kind == "feed"
    assert listing.urls == [
        Discovered("https://news.example.com/local/2024/park.html", utc(2024, 3, 5, 8, 15)),
        Discovered("https://news.example.com/local/2024/bridge.html", utc(2024, 3, 4, 18, 0)),
        Discovered("https://news.example.com/local/2024/guid-only.html"),
    ]  # not the channel link, the atom:link rel=self, the javascript: link or the enclosure


def test_it_reads_atom_alternate_links_against_xml_base_with_updated_times():
    listing = parse_feed(fixture("atom.xml"), base_url="https://elsewhere.example.com/feed")
    assert listing.urls == [
        Discovered("https://blog.example.org/posts/crawling-politely/", utc(2024, 3, 6, 9, 0)),
        Discovered("https://blog.example.org/fr/posts/crawler-poliment/", utc(2024, 3, 6, 9, 0)),
        Discovered("https://blog.example.org/posts/hello/", utc(2024, 1, 1)),  # published when never updated
    ]  # not rel=edit, rel=enclosure or the feed's own links


def test_it_reads_rss1_rdf_items_in_their_declared_encoding():
    listing = parse_feed(fixture("rss1.xml"), base_url="https://science.example.net/rss")
    assert listing.urls == [
        Discovered("https://science.example.net/2024/03/comets.html", utc(2024, 3, 4, 12, 0)),
        Discovered("https://science.example.net/2024/03/meteo.html", utc(2024, 3, 5)),
    ]


@pytest.mark.parametrize(
    "body",
    [
        b'<?xml version="1.0"?><rss version="2.0"><channel><title>Quiet</title><link>https://q.example/</link></channel></rss>',
        b'<feed xmlns="http://www.w3.org/2005/Atom"><title>Quiet</title><id>urn:q</id></feed>',
        b'<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/">'
        b'<channel rdf:about="https://q.example/"><title>Quiet</title></channel></rdf:RDF>',
    ],
)
@pytest.mark.parametrize("content_type", ["", "application/rss+xml", "text/html; charset=utf-8"])
def test_it_reads_a_feed_without_entries_as_a_feed_with_nothing_new(body, content_type):
    assert parse_listing(body, base_url=BASE, content_type=content_type) == Listing("feed")
    assert parse_feed(body, base_url=BASE, content_type=content_type) == Listing("feed")


def test_it_reads_a_feed_by_the_charset_of_its_content_type():
    body = "<rss><channel><item><link>https://q.example/\u03b1</link></item></channel></rss>".encode("iso-8859-7")
    listing = parse_listing(body, base_url=BASE, content_type="application/rss+xml; charset=iso-8859-7")
    assert urls_of(listing) == ["https://q.example/\u03b1"]  # not the Windows-1252 guess "\u00e1"


def test_it_keeps_entries_of_a_bozo_feed_and_reports_an_unreadable_one():
    broken = fixture("rss2.xml").replace(b"</channel>", b"")
    assert len(parse_feed(broken, base_url=BASE).urls) == 3
    assert parse_feed(b"<rss><channel><item><link>", base_url=BASE).urls == []
    assert parse_feed(b"\x00\x01 not a feed", base_url=BASE) == Listing("feed", error="malformed")


# Sniffing


@pytest.mark.parametrize(
    ("name", "content_type", "kind"),
    [
        ("urlset.xml", "text/plain", "urlset"),
        ("sitemapindex.xml", "application/octet-stream", "sitemapindex"),
        ("rss2.xml", "text/xml", "feed"),
        ("atom.xml", "", "feed"),
        ("rss1.xml", "application/rdf+xml", "feed"),
        ("urls.txt", "", "text"),
        ("urls.txt", "text/html", "text"),
    ],
)
def test_it_sniffs_what_a_listing_is_whatever_the_content_type(name, content_type, kind):
    listing = parse_listing(fixture(name), base_url=BASE, content_type=content_type)
    assert (listing.kind, listing.error) == (kind, "")
    assert listing.urls or listing.sitemaps


def test_it_reads_text_plain_whose_first_line_is_no_url_and_reports_other_bodies_as_not_a_listing():
    body = b"# our pages\nhttps://www.example.com/a\n"
    assert parse_listing(body, base_url=BASE).error == "not_a_listing"
    assert urls_of(parse_listing(body, base_url=BASE, content_type="text/plain")) == ["https://www.example.com/a"]
    for other in [b"", b"<!doctype html><html><body><a href='/x'>x</a></body></html>", b"\x89PNG\r\n", b"{}"]:
        assert parse_listing(other, base_url=BASE) == Listing("unknown", error="not_a_listing")


# Hostile input


@pytest.mark.parametrize("parse", PARSERS)
@pytest.mark.parametrize(
    "root",
    [
        b"<urlset><url><loc>http://a.com/LOL</loc></url></urlset>",
        b"<rss><channel><item><link>http://a.com/LOL</link></item></channel></rss>",
    ],
)
def test_it_refuses_entity_expansion_quickly(parse, root):
    started = time.monotonic()
    listing = parse(billion_laughs(root), base_url=BASE)
    assert time.monotonic() - started < 0.5
    assert listing == Listing("unknown", error="unsafe_xml")


@pytest.fixture
def secret_file(tmp_path) -> Path:
    path = tmp_path / "secret.txt"
    path.write_text("TOP-SECRET-7f3a")
    return path


XXE_TEMPLATES = [
    b'<!DOCTYPE urlset [<!ENTITY x SYSTEM "URI">]><urlset><url><loc>http://a.com/&x;</loc></url></urlset>',
    b'<!DOCTYPE rss [<!ENTITY x SYSTEM "URI">]><rss><channel><item><link>http://a.com/&x;</link></item></channel></rss>',
    b'<!DOCTYPE feed [<!-- <a --><!ENTITY % p SYSTEM "URI"> %p;]>'  # a comment hides it from a prolog scan
    b'<feed xmlns="http://www.w3.org/2005/Atom"><entry><link href="/x"/></entry></feed>',
    b'<!DOCTYPE rss SYSTEM "URI"><rss><channel><item><link>http://a.com/&x;</link></item></channel></rss>',
]


def test_it_uses_xxe_documents_that_do_leak_through_a_careless_parser(secret_file):
    body = XXE_TEMPLATES[0].replace(b"URI", secret_file.as_uri().encode())
    assert b"TOP-SECRET" in etree.tostring(etree.fromstring(body, etree.XMLParser(resolve_entities=True)))


@pytest.mark.parametrize("parse", PARSERS)
@pytest.mark.parametrize("template", XXE_TEMPLATES)
def test_it_never_reads_external_entities(parse, template, secret_file):
    body = template.replace(b"URI", secret_file.as_uri().encode())
    for variant in [body, body.decode().encode("utf-16"), gzip.compress(body)]:
        assert "TOP-SECRET" not in repr(parse(variant, base_url=BASE))


@pytest.mark.parametrize("parse", PARSERS)
def test_it_does_not_open_a_local_file_named_by_the_body(parse, tmp_path):
    # feedparser.parse(bytes) opens the bytes as a path when such a file exists.
    feed = tmp_path / "feed.xml"
    feed.write_bytes(fixture("rss2.xml").replace(b"news.example.com/local", b"leaked.example.com/local"))
    assert "leaked" not in repr(parse(str(feed).encode(), base_url=BASE))


@pytest.fixture
def listener():
    """A loopback port that records whether anything connected to it."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        yield server


def connected(server: socket.socket) -> bool:
    try:
        server.accept()[0].close()
    except BlockingIOError:
        return False
    return True


@pytest.mark.parametrize("name", ["urlset.xml", "rss2.xml", "atom.xml", "rss1.xml"])
def test_it_opens_no_connection_for_an_external_dtd(name, listener):
    dtd = b'?><!DOCTYPE x SYSTEM "http://127.0.0.1:%d/x.dtd">' % listener.getsockname()[1]
    assert parse_listing(fixture(name).replace(b"?>", dtd, 1), base_url=BASE).urls
    assert not connected(listener)


def peak_memory_and_seconds(call) -> tuple[Listing, int, float]:
    tracemalloc.start()
    started = time.monotonic()
    try:
        listing = call()
        return listing, tracemalloc.get_traced_memory()[1], time.monotonic() - started
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def bomb() -> bytes:
    body = gzip_bomb(200 * 1024 * 1024)
    assert len(body) < 1024 * 1024
    return body


def test_it_stops_a_gzip_bomb_at_the_cap_quickly_and_in_little_memory(bomb):
    listing, peak, seconds = peak_memory_and_seconds(lambda: parse_sitemap(bomb, base_url=BASE, max_bytes=1024 * 1024))
    assert listing == Listing("unknown", error="too_large")
    assert seconds < 2
    assert peak < 20 * 1024 * 1024


@pytest.mark.parametrize("parse", [parse_feed, parse_listing])
def test_it_stops_a_gzip_bomb_at_the_default_cap_of_50_mib(parse, bomb):
    listing, peak, seconds = peak_memory_and_seconds(lambda: parse(bomb, base_url=BASE))
    assert listing == Listing("unknown", error="too_large")
    assert seconds < 2
    assert peak < MAX_BYTES + 10 * 1024 * 1024


# Properties


def listing_like_bytes():
    fragments = st.sampled_from(
        [
            b"<urlset>",
            b"<sitemapindex>",
            b"<url><loc>",
            b"</loc>",
            b"<lastmod>",
            b"<rss><channel><item><link>",
            b'<feed xmlns="http://www.w3.org/2005/Atom"><entry><link href="',
            b"<rdf:RDF>",
            b"http://",
            b"https://",
            b"//x",
            b"\n",
            b"&amp;",
            b"<!DOCTYPE x>",
            b"\xef\xbb\xbf",
            b"\x1f\x8b",
            b"]]>",
            b"<![CDATA[",
        ]
    )
    pieces = st.lists(st.one_of(fragments, st.binary(max_size=20), st.text(max_size=20).map(str.encode)), max_size=30)
    documents = pieces.map(b"".join)
    return st.one_of(st.binary(max_size=500), documents, documents.map(gzip.compress))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=listing_like_bytes(),
    base_url=st.sampled_from([BASE, "", "ftp://files.example.com/", "http://[::1]/a", "http://["]),
    content_type=st.sampled_from(["", "text/plain", "application/xml"]),
)
def test_it_never_raises_and_returns_only_absolute_http_urls(body, base_url, content_type):
    listing = parse_listing(body, base_url=base_url, content_type=content_type)
    assert listing.kind in {"urlset", "sitemapindex", "feed", "text", "unknown"}
    for found in listing.urls + listing.sitemaps:
        parts = urlsplit(found.url)
        assert parts.scheme in ("http", "https")
        assert parts.hostname
        assert found.lastmod is None or found.lastmod.tzinfo == UTC


URLSET = '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>{loc}</loc></url></urlset>'


def billion_laughs_in_utf7(root: str) -> bytes:
    levels = ['<!ENTITY lol0 "lol">'] + [f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)]
    text = f"<!DOCTYPE lolz [{''.join(levels)}]>{root.replace('LOL', '&lol9;')}"
    hidden = text.replace("<", "+ADw-").replace("!", "+ACE-").replace(">", "+AD4-")  # valid UTF-7
    assert b"<!" not in hidden.encode() and codecs.decode(hidden.encode(), "utf-7") == text
    return b'<?xml version="1.0" encoding="UTF-7"?>' + hidden.encode()


@pytest.mark.parametrize("parse", PARSERS)
@pytest.mark.parametrize(
    "root",
    [URLSET.format(loc="http://a.com/LOL"), "<rss><channel><item><link>http://a.com/LOL</link></item></channel></rss>"],
)
def test_it_refuses_a_billion_laughs_hidden_in_utf7(parse, root):
    started = time.monotonic()
    assert parse(billion_laughs_in_utf7(root), base_url=BASE) == Listing("unknown", error="unsafe_xml")
    assert time.monotonic() - started < 0.5


@pytest.mark.parametrize("encoding", ["utf-7", "cp037", "x-unknown-charset"])
def test_it_refuses_xml_declared_in_an_encoding_a_byte_search_cannot_read(encoding):
    body = f'<?xml version="1.0" encoding="{encoding}"?>{URLSET.format(loc="http://a.com/x")}'.encode()
    assert parse_sitemap(body, base_url=BASE).error == "unsafe_xml"
    assert parse_listing(body, base_url=BASE).error == "unsafe_xml"


@pytest.mark.parametrize("encoding", ["UTF-8", "utf-16", "UTF-16LE", "ISO-8859-1", "windows-1252", "Shift_JIS"])
def test_it_still_reads_sitemaps_declared_in_ordinary_encodings(encoding):
    xml = f'<?xml version="1.0" encoding="{encoding}"?>{URLSET.format(loc="http://a.com/caf%C3%A9")}'
    body = (codecs.BOM_UTF16_LE if encoding == "UTF-16LE" else b"") + xml.encode(encoding)
    for parse in (parse_sitemap, parse_listing):
        listing = parse(body, base_url=BASE)
        assert (listing.kind, listing.error, [u.url for u in listing.urls]) == (
            "urlset",
            "",
            ["http://a.com/caf%C3%A9"],
        )
