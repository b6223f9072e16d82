"""Href resolution as browsers read it: one resolver for links, canonical and sitemap URLs and
robots.txt's Sitemap lines. Pure: no Django, no network."""

import functools
import re
from urllib.parse import urldefrag, urljoin, urlparse, urlsplit


def absolute_http_url(base: str, href: str) -> str | None:
    """href resolved against base, without fragment, or None unless it is http(s)."""
    href = (href or "").strip()
    if not href or href.startswith("#"):
        return None
    href = browser_href(base, href)
    if href is None:
        return None
    key = _join_key(base, href)
    if key is None:
        return _absolute_http_url(base, href)
    try:
        return _JOINED[key]
    except KeyError:
        if len(_JOINED) >= _JOINED_MAX:
            _JOINED.clear()
        url = _JOINED[key] = _absolute_http_url(base, href)
        return url


def browser_href(base: str, href: str) -> str | None:
    """The href as a browser reads it where urljoin reads it otherwise, for the http(s) URLs that
    are kept (the URL standard): a backslash before the query is a "/"; extra slashes before a host
    are ignored ("///h/x", "http:///h/x"); an http(s) scheme other than the base's starts a host
    whatever the slashes ("https:h/x" on an http page). None when no host follows."""
    if "\\" in href:
        href = backslashes_as_slashes(href)
    if href[:1] == "/":
        return _with_host("//", href.lstrip("/")) if href.startswith("///") else href
    colon = href.find(":", 4, 6)  # "http:" or "https:" (str methods: this runs for every link)
    name = href[:colon].lower() if colon > 0 else ""
    if name not in ("http", "https"):
        return href
    if href.startswith("///", colon + 1) or (not href.startswith("//", colon + 1) and name != _scheme_of(base)):
        return _with_host(name + "://", href[colon + 1 :].lstrip("/"))
    return href  # "http://host", or the page's scheme without "//": a relative path, as urljoin reads it


def _with_host(prefix: str, rest: str) -> str | None:
    return prefix + rest if rest[:1] not in ("", "?", "#") else None


def _scheme_of(base: str) -> str:
    try:
        return _base_parts(base)[0]
    except ValueError:
        return ""


def backslashes_as_slashes(url: str) -> str:
    """A backslash before the query is a "/" to browsers and w3lib in an http(s) URL, so "\\a.html"
    starts at the root and "\\\\host\\x" or "http:\\\\host\\x" name a host, where urljoin would read each
    as a path relative to the page's folder and urlsplit takes "http://a.com\\b" to have host
    "a.com\\b". The query and fragment keep theirs."""
    end = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=len(url))
    return url[:end].replace("\\", "/") + url[end:]


# Resolved links by (base scheme, host, folder, href), for the hrefs whose resolution depends on
# nothing else of the base (see _join_key): a site's pages link the same URLs over and over, and urljoin,
# urldefrag and urlsplit per link were a sixth of the extract stage. Bounded: cleared when full.
_JOINED: dict[tuple[str, str, str, str], str | None] = {}
_JOINED_MAX = 100_000
_NETWORK_PATH_END = "/?#"


def _join_key(base: str, href: str) -> tuple[str, str, str, str] | None:
    """The cache key of an href whose resolution depends on the base's scheme, host and folder
    only: a path from the root ("/a/b") or a URL with a host ("//h/x", "http://h/x"), keyed without
    the folder; a relative path ("../a/b", "c.html"), keyed with the folder when the base's path
    starts at the root. None for the others (queries and fragments alone, which keep the base's
    path, a colon that may start a scheme, "//" without a host, tab and line-break characters that
    urlsplit drops before it reads the href)."""
    if "\t" in href or "\n" in href or "\r" in href:
        return None
    try:
        scheme, netloc, folder = _base_parts(base)
    except ValueError:  # a base urlsplit refuses: resolved (and refused) the long way
        return None
    first = href[0]
    if first == "/":
        if href[1:2] == "/" and (len(href) < 3 or href[2] in _NETWORK_PATH_END):
            return None  # "//" with no host resolves against the base's path
        return scheme, netloc, "", href
    if href.startswith("http://"):
        return None if len(href) < 8 or href[7] in _NETWORK_PATH_END else (scheme, netloc, "", href)
    if href.startswith("https://"):
        return None if len(href) < 9 or href[8] in _NETWORK_PATH_END else (scheme, netloc, "", href)
    if first in _KEEPS_BASE_PATH or ":" in href or folder is None:
        return None
    return scheme, netloc, folder, href


_KEEPS_BASE_PATH = "?#;"


@functools.lru_cache(maxsize=256)
def _base_parts(base: str) -> tuple[str, str, str | None]:
    """The base's scheme, host, and folder (its path up to the last "/"; None unless the path
    starts with "/", where urljoin's merge of the two paths depends on the folder alone)."""
    parts = urlparse(base)
    path = parts.path
    return parts.scheme, parts.netloc, path[: path.rfind("/") + 1] if path.startswith("/") else None


def _absolute_http_url(base: str, href: str) -> str | None:
    """urljoin, without the fragment, and only http(s) with a host. The host is read from the text
    when the authority is plain (printable ASCII, no user, brackets or escapes, perhaps a port):
    urlsplit decides only the others."""
    try:
        url = _plain_join(base, href) or urljoin(base, href)
        if "#" in url:
            url = urldefrag(url)[0]
    except ValueError:
        return None
    if _PLAIN_HTTP_URL.match(url):
        return url
    return _checked_http_url(url)


# An http(s) URL whose host is plain: printable ASCII without a user, brackets or escapes, then
# perhaps a port of digits, ended by the path, the query or the end. urlsplit would read the same
# scheme and a non-empty host from it.
_PLAIN_HTTP_URL = re.compile(r"https?://[^\x00-\x1f\x7f-\U0010ffff@:\[\]%\\/?]+(?::[0-9]*)?(?:[/?]|\Z)")


def _plain_join(base: str, href: str) -> str | None:
    """urljoin's answer for the two commonest hrefs, where it is a copy: an http(s) URL with a host,
    and a path from the root without dot segments against an http(s) base. Only printable ASCII
    without ";" (path parameters), "#", brackets or a last "?" (what urlparse and urlunparse would
    rewrite); None for every other href (urljoin resolves it)."""
    if not _PLAIN_HREF.fullmatch(href):
        return None
    scheme, netloc, _ = _base_parts(base)  # a base urlparse refuses raises here, as in urljoin
    if href.startswith("http://"):
        return href if href[7:8] not in _NETWORK_PATH_END else None  # no host: urljoin takes the base's
    if href.startswith("https://"):
        return href if href[8:9] not in _NETWORK_PATH_END else None
    if href[0] != "/" or href[1:2] == "/" or "/." in href.partition("?")[0]:
        return None
    return f"{scheme}://{netloc}{href}" if scheme in ("http", "https") and netloc else None


_PLAIN_HREF = re.compile(r"[^\x00-\x20\x7f-\U0010ffff;#\[\]]+(?<!\?)")


def _checked_http_url(url: str) -> str | None:
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return url
