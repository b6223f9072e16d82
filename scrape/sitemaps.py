"""Sitemaps (XML, gzip, text) and feeds (RSS, Atom) read as lists of URLs. Pure: bytes in, a Listing out;
no Django, no network."""

import codecs
import io
import re
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlsplit

import feedparser
from lxml import etree

from core.hrefs import absolute_http_url
from scrape.safexml import unsafe_xml

SITEMAP_MAX_URLS = 50_000  # the sitemap protocol's limits
MAX_BYTES = 50 * 1024 * 1024  # decompressed; parse_feed and parse_listing use it too
FEED_MAX_URLS = 10_000
GZIP_MAGIC = b"\x1f\x8b"
FEED_ROOTS = ("rss", "feed", "RDF")
SITEMAP_ROOTS = {"urlset": "url", "sitemapindex": "sitemap"}  # root -> entry element
_CHUNK = 64 * 1024
_SNIFF_BYTES = 64 * 1024
_WIDE_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)  # UTF-32's BOMs start with UTF-16's
# libxml2 with no entity substitution, no DTD loading, no network and its default size and depth limits.
_SAFE_XML = {"resolve_entities": False, "no_network": True, "load_dtd": False, "huge_tree": False}
_YEAR_OR_MONTH = re.compile(r"\d{4}(-\d{2})?")
_CONTROL_OR_SPACE = re.compile(r"[\x00-\x20\x7f]")
_LAST_ENTRY_END = re.compile(rb"(?s).*</(?:[A-Za-z_][\w.-]*:)?(?:url|sitemap)\s*>")  # greedy: the last one
_BARE_AMPERSAND = re.compile(rb"&(?!#[0-9]+;|#[xX][0-9a-fA-F]+;|(?:amp|lt|gt|quot|apos);)")


@dataclass
class Discovered:
    url: str
    lastmod: datetime | None = None


@dataclass
class Listing:
    """error: "too_large", "bad_gzip", "unsafe_xml" (declares entities, or is in an encoding like UTF-7 that
    could hide a declaration: scrape/safexml.py), "malformed" or "not_a_listing"."""

    kind: str  # "urlset" | "sitemapindex" | "feed" | "text" | "unknown"
    urls: list[Discovered] = field(default_factory=list)
    sitemaps: list[Discovered] = field(default_factory=list)  # children of a sitemap index
    error: str = ""  # an error code when the document could not be read


class _TooLarge(Exception):
    pass


def parse_sitemap(
    body: bytes, *, base_url: str, max_urls: int = SITEMAP_MAX_URLS, max_bytes: int = MAX_BYTES
) -> Listing:
    """A sitemap urlset or index (XML, or one URL per line), gzipped or not, capped at max_urls entries
    and max_bytes decompressed."""
    body, error = _gunzipped(body, max_bytes)
    if error:
        return Listing("unknown", error=error)
    if _looks_like_xml(body):
        return _xml_sitemap(body, base_url, max_urls)
    return _text_sitemap(body, base_url, max_urls)


def parse_feed(body: bytes, *, base_url: str, content_type: str = "", max_urls: int = FEED_MAX_URLS) -> Listing:
    """The entry links of an RSS 0.9x/1.0/2.0 or Atom feed, with their updated (else published) time.
    content_type is the response's (its charset counts); a feed without entries is a feed with
    nothing new, and only a body that is no feed at all is "malformed"."""
    body, error = _gunzipped(body, MAX_BYTES)
    if error:
        return Listing("unknown", error=error)
    if unsafe_xml(body):
        return Listing("unknown", error="unsafe_xml")
    # A file-like object, never bytes: feedparser opens bytes that name an existing file ("/etc/passwd").
    parsed = feedparser.parse(
        io.BytesIO(body),
        # the base for relative links without xml:base, and the type: without one every feed is "bozo"
        response_headers={"content-location": base_url, "content-type": content_type or "application/xml"},
        resolve_relative_uris=False,
        sanitize_html=False,
    )
    if not parsed.entries and not parsed.get("version"):
        return Listing("feed", error="malformed")
    return Listing("feed", urls=_feed_urls(parsed.entries, base_url, max_urls))


def parse_listing(body: bytes, *, base_url: str, content_type: str = "") -> Listing:
    """Whatever listing the body is (gzip, sitemap, feed or text sitemap), read by sniffing the bytes:
    servers label sitemaps as text/plain, application/octet-stream or text/html often enough."""
    body, error = _gunzipped(body, MAX_BYTES)
    if error:
        return Listing("unknown", error=error)
    if not _looks_like_xml(body) and (_starts_with_url(body) or content_type.lower().startswith("text/plain")):
        listing = _text_sitemap(body, base_url, SITEMAP_MAX_URLS)
        if listing.urls:
            return listing
    if unsafe_xml(body):
        return Listing("unknown", error="unsafe_xml")
    root = _root_name(body)
    if root in SITEMAP_ROOTS:
        return _xml_sitemap(body, base_url, SITEMAP_MAX_URLS)
    if root in FEED_ROOTS:
        return parse_feed(body, base_url=base_url, content_type=content_type)
    return Listing("unknown", error="not_a_listing")


# Gzip


def _gunzipped(body: bytes, max_bytes: int) -> tuple[bytes, str]:
    """The body, inflated when it starts with gzip's magic bytes (whatever the URL or Content-Type
    say), or an error code: "too_large" past max_bytes, "bad_gzip" when corrupt or truncated."""
    if not body.startswith(GZIP_MAGIC):
        return (body, "") if len(body) <= max_bytes else (b"", "too_large")
    try:
        return _inflate(memoryview(body), max_bytes), ""
    except _TooLarge:
        return b"", "too_large"
    except zlib.error:
        return b"", "bad_gzip"


def _inflate(body: memoryview, max_bytes: int) -> bytes:
    """Inflate every gzip member in bounded steps, input and output _CHUNK at a time, so a gzip bomb
    (1 GiB of zeros is 1 MiB gzipped) stops once max_bytes have come out, holding about max_bytes."""
    inflater, pos, data = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS), 0, b""
    pieces, size = [], 0
    while data or pos < len(body):
        if not data:
            data, pos = body[pos : pos + _CHUNK], min(pos + _CHUNK, len(body))
        piece = inflater.decompress(data, _CHUNK)
        size += len(piece)
        if size > max_bytes:
            raise _TooLarge
        pieces.append(piece)
        data = inflater.unconsumed_tail
        if inflater.eof:
            pos -= len(inflater.unused_data)  # where this member ended
            if body[pos : pos + 2] != GZIP_MAGIC:
                return b"".join(pieces)  # trailing padding or garbage is ignored, as gzip(1) does
            inflater, data = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS), b""
    raise zlib.error("truncated gzip stream")


# XML sitemaps


def _xml_sitemap(body: bytes, base_url: str, max_urls: int) -> Listing:
    if unsafe_xml(body):
        return Listing("unknown", error="unsafe_xml")
    body = _without_leading_space(body)
    try:
        root = etree.fromstring(body, etree.XMLParser(**_SAFE_XML))
    except etree.XMLSyntaxError:
        root = _recovered(body)
    if root is None:
        return Listing("unknown", error="malformed")
    if _dtd_declares_entities(root):
        return Listing("unknown", error="unsafe_xml")
    kind = _local_name(root)
    if kind not in SITEMAP_ROOTS:
        return Listing("unknown", error="not_a_listing")
    entries = _sitemap_entries(root, SITEMAP_ROOTS[kind], base_url, max_urls)
    return Listing(kind, sitemaps=entries) if kind == "sitemapindex" else Listing(kind, urls=entries)


def _recovered(body: bytes):
    """The root of a sitemap that is not well-formed, keeping its whole entries, as Scrapy does: a
    generator that timed out or a cut transfer leaves a truncated file, and one unescaped "&" spoils
    a whole file. The body is cut after its last entry's end tag (what follows is part of an entry at
    best) and an "&" that starts no reference is read as written. Same guards as the strict parser;
    None when no entry is whole."""
    last_end = _LAST_ENTRY_END.match(body)
    if last_end is None:
        return None
    head = _BARE_AMPERSAND.sub(b"&amp;", body[: last_end.end()])
    try:
        return etree.fromstring(head, etree.XMLParser(recover=True, **_SAFE_XML))
    except etree.XMLSyntaxError:
        return None


def _dtd_declares_entities(root) -> bool:
    """The same check on the parsed DTD, for encodings the byte search cannot see through."""
    dtd = root.getroottree().docinfo.internalDTD
    return dtd is not None and bool(dtd.entities())


def _sitemap_entries(root, entry_name: str, base_url: str, max_urls: int) -> list[Discovered]:
    found: dict[str, Discovered] = {}
    for entry in root:
        if _local_name(entry) != entry_name:
            continue
        fields = _child_texts(entry)
        url = _absolute_http_url(base_url, fields.get("loc", ""))
        if url and url not in found:
            found[url] = Discovered(url, _w3c_datetime(fields.get("lastmod", "")))
            if len(found) >= max_urls:
                break
    return list(found.values())


def _child_texts(element) -> dict[str, str]:
    """Text of each child by local name (first one wins): lenient about namespaces."""
    texts: dict[str, str] = {}
    for child in element:
        name = _local_name(child)
        if name and name not in texts:
            texts[name] = "".join(child.itertext())
    return texts


def _local_name(element) -> str:
    """ "{namespace}name" or an unbound "prefix:name" as "name" (etree.QName raises on odd recovered tags)."""
    return element.tag.rpartition("}")[2].rpartition(":")[2] if isinstance(element.tag, str) else ""


def _w3c_datetime(value: str) -> datetime | None:
    """A W3C datetime (YYYY, YYYY-MM, YYYY-MM-DD or a datetime with offset) as an aware UTC datetime.
    Dates and datetimes without an offset are read as UTC; anything unreadable is None."""
    value = value.strip()
    if not value or len(value) > 64:
        return None
    if _YEAR_OR_MONTH.fullmatch(value):
        value += "-01" if len(value) == 7 else "-01-01"
    try:
        parsed = datetime.fromisoformat(value)
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError):
        return None


# Text sitemaps


def _text_sitemap(body: bytes, base_url: str, max_urls: int) -> Listing:
    """One absolute http(s) URL per line (UTF-8, as the protocol asks); other lines are skipped."""
    found: dict[str, Discovered] = {}
    for line in _text_of(body).splitlines():
        line = line.strip()
        if _is_url_line(line):
            url = _absolute_http_url(base_url, line)
            if url and url not in found:
                found[url] = Discovered(url)
                if len(found) >= max_urls:
                    break
    return Listing("text", urls=list(found.values()))


def _text_of(body: bytes) -> str:
    return body.decode("utf-8", "replace").removeprefix("\ufeff")


def _is_url_line(line: str) -> bool:
    return line.lower().startswith(("http://", "https://")) and not _CONTROL_OR_SPACE.search(line)


def _starts_with_url(body: bytes) -> bool:
    first = next((line.strip() for line in _text_of(body[:_SNIFF_BYTES]).splitlines() if line.strip()), "")
    return _is_url_line(first)


# Sniffing and URLs


def _looks_like_xml(body: bytes) -> bool:
    return body.startswith(_WIDE_BOMS) or _without_leading_space(body).startswith(b"<")


def _without_leading_space(body: bytes) -> bytes:
    """Drop whitespace before the XML declaration, which libxml2 refuses and many sitemaps have."""
    return body.removeprefix(codecs.BOM_UTF8).lstrip()  # no copy when there is nothing to drop


def _root_name(body: bytes) -> str | None:
    """Local name of the root element, read from the head of the body by a recovering pull parser."""
    parser = etree.XMLPullParser(events=("start",), recover=True, **_SAFE_XML)
    try:
        parser.feed(body[:_SNIFF_BYTES])
        return next((_local_name(element) for _, element in parser.read_events()), None)
    except etree.XMLSyntaxError:
        return None


def _absolute_http_url(base: str, href: str) -> str | None:
    """href resolved by core.hrefs, or None when it holds whitespace or control characters: spaces
    inside a path are kept (canonicalize escapes them), but not in the host."""
    href = (href or "").strip()
    if not href or _CONTROL_OR_SPACE.search(href.replace(" ", "")):
        return None
    url = absolute_http_url(base, href)
    if url is None or _CONTROL_OR_SPACE.search(urlsplit(url).hostname or ""):
        return None
    return url


# Feeds


def _feed_urls(entries, base_url: str, max_urls: int) -> list[Discovered]:
    found: dict[str, Discovered] = {}
    for entry in entries:
        lastmod = _entry_time(entry)
        for href in _entry_hrefs(entry):
            url = _absolute_http_url(base_url, href)
            if url and url not in found:
                found[url] = Discovered(url, lastmod)
                if len(found) >= max_urls:
                    return list(found.values())
    return list(found.values())


def _entry_hrefs(entry) -> list[str]:
    alternates = [link.get("href") for link in entry.get("links", []) if link.get("rel", "alternate") == "alternate"]
    return [href for href in [*alternates, entry.get("link")] if isinstance(href, str)]  # document order


def _entry_time(entry) -> datetime | None:
    """Updated, else published, as an aware datetime (feedparser's parsed times are UTC struct_times).
    `in` first: entry.get("updated_parsed") falls back to published with a DeprecationWarning."""
    value = entry["updated_parsed"] if "updated_parsed" in entry else entry.get("published_parsed")
    try:
        return datetime(*value[:6], tzinfo=UTC) if value else None
    except (TypeError, ValueError, OverflowError):
        return None
