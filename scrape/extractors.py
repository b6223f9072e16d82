"""Standard extraction from HTML with lxml. Pure: bytes in, an Extraction out; no Django, no network."""

import codecs
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import lxml.etree
import lxml.html

from core.hrefs import absolute_http_url

from . import metadata
from .metadata import clean_text, element_text

HTML_TYPES = ("text/html", "application/xhtml+xml")
MAX_TEXT_CHARS = 100_000
MEDIA_EXTENSIONS = {
    "image": (".jpg", ".jpeg", ".png", ".gif", ".webp", ".svg", ".avif", ".bmp"),
    "video": (".mp4", ".webm", ".mkv", ".mov", ".m4v", ".m3u8", ".ogv"),
    "audio": (".mp3", ".ogg", ".oga", ".wav", ".flac", ".m4a", ".opus"),
}
# The visible text with a line break mark (a Unicode noncharacter, which \s does not match) around
# every block, as one XSLT pass: libxslt walks the tree in C, where a Python walk over lxml's
# element proxies costs several times the parse on a large page.
_BREAK = "\ufdd0"
_BLOCK_TAGS = (
    "address", "article", "aside", "blockquote", "caption", "center", "dd", "details", "dialog", "dir", "div",
    "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
    "header", "hgroup", "legend", "li", "main", "menu", "nav", "ol", "optgroup", "option", "p", "pre",
    "section", "summary", "table", "tbody", "tfoot", "thead", "tr", "ul", "textarea",
)  # fmt: skip
_TEXT_LINES = lxml.etree.XSLT(
    lxml.etree.XML(f"""<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">
<xsl:output method="text" encoding="utf-8"/>
<xsl:template match="/">
  <xsl:choose>
    <xsl:when test="/*/body"><xsl:apply-templates select="/*/body"/></xsl:when>
    <xsl:otherwise><xsl:apply-templates/></xsl:otherwise>
  </xsl:choose>
</xsl:template>
<xsl:template match="head|script|style|noscript|template"/>
<xsl:template match="{"|".join(_BLOCK_TAGS)}">&#xFDD0;<xsl:apply-templates/>&#xFDD0;</xsl:template>
<xsl:template match="br|hr">&#xFDD0;</xsl:template>
<xsl:template match="td|th"><xsl:apply-templates/><xsl:text> </xsl:text></xsl:template>
<xsl:template match="pre//text()|textarea//text()">
  <xsl:value-of select="translate(., '&#10;', '&#xFDD0;')"/>
</xsl:template>
</xsl:stylesheet>""")
)
_SRCSET_URL = re.compile(r"[\s,]*(\S+)")
_BOMS = (codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
# XPaths compiled once: compiling one costs more than running it on a page.
_DESCRIPTION = lxml.etree.XPath("//meta[translate(@name, 'DESCRIPTION', 'description')='description']/@content")
_LANG = lxml.etree.XPath("/html/@lang")
_BASE = lxml.etree.XPath("//base/@href")
# (kind, XPath, whether the attribute is a srcset). "//source", not "/source": libxml2's HTML 4
# parser does not know <source> is void, so a second <source> ends up inside the first.
_MEDIA_QUERIES = tuple(
    (kind, lxml.etree.XPath(xpath), is_srcset)
    for kind, xpath, is_srcset in (
        ("image", "//img/@src | //video/@poster", False),
        ("image", "//img/@srcset | //picture//source/@srcset", True),
        ("video", "//video/@src | //video//source/@src", False),
        ("audio", "//audio/@src | //audio//source/@src", False),
    )
)
_MEDIA_SUFFIXES = tuple(suffix for suffixes in MEDIA_EXTENSIONS.values() for suffix in suffixes)


@dataclass
class Link:
    url: str
    text: str = ""
    nofollow: bool = False


@dataclass
class MediaRef:
    url: str
    kind: str


@dataclass
class Extraction:
    title: str = ""
    description: str = ""
    lang: str = ""
    text: str = ""
    links: list[Link] = field(default_factory=list)
    media: list[MediaRef] = field(default_factory=list)
    canonical: str = ""
    headings: list[dict] = field(default_factory=list)
    opengraph: dict = field(default_factory=dict)
    json_ld: list = field(default_factory=list)
    dropped: dict = field(default_factory=dict)  # what a cap left out: {"media": 19000, "json_ld": 3}


def looks_like_html(content_type: str, body: bytes) -> bool:
    if content_type:
        return content_type in HTML_TYPES
    head = body[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html")) or b"<body" in head


def looks_binary(body: bytes) -> bool:
    """Binary served as text/html: NUL bytes in the first KiB (UTF-16 pages start with a BOM)."""
    head = body[:1024]
    return b"\x00" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff"))


def extract_html(
    body: bytes, base_url: str, *, charset: str | None = None, max_links: int = 5000, caps: dict | None = None
) -> Extraction:
    """Title, description, language, visible text, links and media references of an HTML page.
    `caps` bounds the media references, OpenGraph keys and JSON-LD blocks kept (CAPS by default);
    what they leave out is counted in `dropped`."""
    doc = _parse(body, charset)
    if doc is None:
        return Extraction()
    caps = CAPS | (caps or {})
    dropped: dict[str, int] = {}
    base = _base_href(doc, base_url)
    links = _links(doc, base, max_links)
    opengraph = dict(_capped(list(metadata.opengraph(doc).items()), caps, "opengraph", dropped))
    return Extraction(
        title=clean_text(doc.findtext(".//title") or "")[:1000],
        description=clean_text(_first(_DESCRIPTION(doc)))[:2000],
        lang=clean_text(_first(_LANG(doc)))[:20],
        links=links,
        media=_capped(_unique(_media(doc, base, links) + _og_media(opengraph, base)), caps, "media", dropped),
        canonical=metadata.canonical_link(doc, base),
        headings=metadata.headings(doc),
        opengraph=opengraph,
        json_ld=_capped(metadata.json_ld(doc), caps, "json_ld", dropped),
        text=_visible_text(doc),
        dropped=dropped,
    )


# What one page may make at most (the crawl passes its CRAWL_MAX_* settings).
CAPS = {"media": 1000, "opengraph": 100, "json_ld": 50}


def _capped(values: list, caps: dict, name: str, dropped: dict) -> list:
    """The first caps[name] values; how many were left out goes into dropped[name]."""
    if len(values) > caps[name]:
        dropped[name] = len(values) - caps[name]
    return values[: caps[name]]


def _unique(refs: list[MediaRef]) -> list[MediaRef]:
    seen: dict[str, MediaRef] = {}
    for ref in refs:
        seen.setdefault(ref.url, ref)
    return list(seen.values())


def _og_media(og: dict, base: str) -> list[MediaRef]:
    refs = []
    for key, kind in (("og:image", "image"), ("og:video", "video"), ("og:audio", "audio")):
        url = absolute_http_url(base, og.get(key, ""))
        if url:
            refs.append(MediaRef(url=url, kind=kind))
    return refs


def _parse(body: bytes, charset: str | None):
    if not body.strip():
        return None
    body, encoding = _as_utf8(body, _known_charset(charset))
    parser = lxml.html.HTMLParser(encoding=encoding, remove_comments=True)
    try:
        return lxml.html.document_fromstring(body, parser=parser)
    except (lxml.etree.ParserError, ValueError):
        return None


def _known_charset(charset: str | None) -> str | None:
    if not charset:
        return None
    try:
        "".encode(charset)
    except LookupError:
        return None
    return charset


def _as_utf8(body: bytes, charset: str | None) -> tuple[bytes, str | None]:
    """Decode with Python's codec, not libxml2's: libxml2 raises LookupError on many names Python
    knows ("utf_8", "latin_1", "cp437", "euc_jp"). Without a usable charset, or when a byte order
    mark says otherwise (it wins over the header, as in browsers), lxml sniffs the page."""
    if charset is None or body.startswith(_BOMS):
        return body, None
    try:
        return body.decode(charset, "replace").encode("utf-8"), "utf-8"
    except (UnicodeError, ValueError):  # e.g. codecs that allow only strict errors ("idna")
        return body, None


def _base_href(doc, page_url: str) -> str:
    href = _first(_BASE(doc))
    return absolute_http_url(page_url, href) or page_url if href else page_url


def _first(values) -> str:
    return str(values[0]) if values else ""


_META_ROBOTS = lxml.etree.XPath("//meta[translate(@name, 'ROBOTS', 'robots')='robots']/@content")  # any case


def _links(doc, base: str, max_links: int) -> list[Link]:
    """The page's links, each marked nofollow by its rel or by the page's <meta name="robots">
    (nofollow or none)."""
    directives = {d.strip().lower() for value in _META_ROBOTS(doc) for d in str(value).split(",")}
    page_nofollow = bool(directives & {"nofollow", "none"})
    seen, links = set(), []
    for el in _iter_document(doc, "a", "area"):
        href = el.get("href")
        if href is None:
            continue
        url = absolute_http_url(base, href)
        if url is None or url in seen:
            continue
        seen.add(url)
        nofollow = page_nofollow or "nofollow" in (el.get("rel") or "").lower().split()
        links.append(Link(url=url, text=clean_text(element_text(el))[:300], nofollow=nofollow))
        if len(links) >= max_links:
            break
    return links


def _iter_document(doc, *tags):
    """The elements of those tags in document order, as "//a | //area" finds them: libxml2 puts what
    follows a closed </html> in a second root element, a sibling of doc."""
    for top in (doc, *doc.itersiblings()):
        yield from top.iter(*tags)


def _media(doc, base: str, links: list[Link]) -> list[MediaRef]:
    """Embedded media, and links to files with a media extension (links already resolved)."""
    found: dict[str, str] = {}
    for kind, xpath, is_srcset in _MEDIA_QUERIES:
        for value in xpath(doc):
            for candidate in _srcset_urls(str(value)) if is_srcset else [str(value)]:
                url = absolute_http_url(base, candidate)
                if url:
                    found.setdefault(url, kind)
    for link in links:
        kind = media_kind_of(link.url)
        if kind:
            found.setdefault(link.url, kind)
    return [MediaRef(url=u, kind=k) for u, k in found.items()]


def _srcset_urls(value: str) -> list[str]:
    """Every URL of a srcset ("a.jpg 1x, b.jpg 2x") as HTML reads it: a URL runs to whitespace, so a
    comma inside one (".../w_300,h_200/a.jpg 300w") stays; its descriptors run to the next comma."""
    urls, pos = [], 0
    while match := _SRCSET_URL.match(value, pos):
        url, pos = match.group(1), match.end()
        if url.endswith(","):
            url = url.rstrip(",")
        else:
            comma = value.find(",", pos)
            pos = len(value) if comma < 0 else comma + 1
        if url:
            urls.append(url)
    return urls


def media_kind_of(url: str) -> str | None:
    plain = not ("\t" in url or "\r" in url or "\n" in url)  # urlsplit drops these before it reads
    if plain and not url.partition("#")[0].partition("?")[0].lower().endswith(_MEDIA_SUFFIXES):
        return None  # no path can end with one (most links): no urlsplit
    path = urlsplit(url).path.lower()
    for kind, extensions in MEDIA_EXTENSIONS.items():
        if path.endswith(extensions):
            return kind
    return None


def _visible_text(doc) -> str:
    """The body's text with a line per block (paragraph, heading, list item, table row...), cells
    apart by a space and inline elements joined as written; scripts and styles left out."""
    try:
        marked = str(_TEXT_LINES(doc))
    except lxml.etree.XSLTError:  # beyond libxslt's limits (the parser caps nesting well below): one line
        marked = doc.text_content()
    lines = map(" ".join, map(str.split, marked.split(_BREAK)))  # str.split beats a regex here
    return "\n".join(filter(None, lines))[:MAX_TEXT_CHARS]
