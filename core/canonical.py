"""Canonical URLs, URL keys and crawl scope. Pure functions: no Django, no network."""

import functools
import hashlib
import re
from dataclasses import dataclass
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from w3lib.url import canonicalize_url

from core.hostnames import BadHost, browser_host
from core.hrefs import backslashes_as_slashes
from core.patterns import UserPattern

MAX_URL_LENGTH = 2000
ALLOWED_SCHEMES = ("http", "https")
DEFAULT_PORTS = {"http": 80, "https": 443}
TRACKING_PARAMS = frozenset(
    {
        "fbclid",
        "gclid",
        "dclid",
        "msclkid",
        "yclid",
        "igshid",
        "mc_cid",
        "mc_eid",
        "_ga",
        "_gl",
        "phpsessid",
        "jsessionid",
        "sessionid",
        "session_id",
        "aspsessionid",
        "cfid",
        "cftoken",
    }
)
_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
# "sid" names a session in phpBB (32 hex digits) and an article in PHP-Nuke ("sid=123") and Slashcode
# ("sid=04/05/12/1234567"): it is dropped only when its value looks like a session token.
_SESSION_TOKEN = re.compile(r"[0-9A-Za-z]{20,}")


class InvalidURL(ValueError):
    """A URL that cannot be crawled; `code` is the error code stored on its row."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def _is_tracking(name: str, value: str) -> bool:
    lowered = name.lower()
    if lowered == "sid":
        return bool(_SESSION_TOKEN.fullmatch(value))
    return lowered.startswith("utm_") or lowered in TRACKING_PARAMS


def canonicalize(url: str) -> str:
    """The canonical form used for dedupe, and the URL fetched: w3lib's canonical URL (sorted query,
    no fragment, resolved dot segments, normalised escapes) with the host as browsers read it
    (core.hostnames), without user info, default port or tracking/session params; the query's
    other bytes are kept as written."""
    url = url.strip()
    if len(url) > MAX_URL_LENGTH:
        raise InvalidURL("url_too_long", f"URL longer than {MAX_URL_LENGTH} characters")
    url = backslashes_as_slashes(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidURL("invalid_url", f"malformed URL: {exc}") from None
    scheme = parts.scheme.lower()
    if not scheme:
        raise InvalidURL("invalid_url", "URL has no scheme (expected http:// or https://)")
    if scheme not in ALLOWED_SCHEMES:
        raise InvalidURL("blocked_scheme", f"scheme {scheme or '(none)'!r} is not http or https")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise InvalidURL("invalid_url", "URL has no host")
    netloc = _netloc(_host_as_browsers_read_it(host), port, scheme)
    query = _without_tracking(parts.query)
    try:
        return canonicalize_url(urlunsplit((scheme, netloc, _escape_stray_percents(parts.path) or "/", query, "")))
    except (ValueError, UnicodeError) as exc:
        raise InvalidURL("invalid_url", f"malformed URL: {exc}") from None


def _without_tracking(query: str) -> str:
    """The query without tracking and session parameters, every other byte as written: decoding and
    re-encoding would turn a Latin-1 or Shift_JIS escape ("%E9") into U+FFFD, so two queries would
    share a key and the server would be asked for a URL it never linked. w3lib sorts what is left."""
    return "&".join(pair for pair in query.split("&") if pair and not _is_tracking_pair(pair))


def _is_tracking_pair(pair: str) -> bool:
    name, _, value = pair.partition("=")
    return _is_tracking(unquote_plus(name), unquote_plus(value))


def _host_as_browsers_read_it(host: str) -> str:
    if ":" in host:  # an IPv6 literal, which urlsplit checked
        return host
    try:
        return browser_host(host)
    except BadHost as exc:
        raise InvalidURL("invalid_url", f"malformed URL: {exc}") from None


def _escape_stray_percents(path: str) -> str:
    """A "%" that starts no escape becomes "%25": else w3lib turns "%%41" into "%A", which the
    next pass reads as an escape, and canonicalize would not be idempotent."""
    return _STRAY_PERCENT.sub("%25", path)


def _netloc(host: str, port: int | None, scheme: str) -> str:
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if port is None or port == DEFAULT_PORTS[scheme]:
        return host.lower()
    return f"{host.lower()}:{port}"


def url_key(canonical_url: str) -> str:
    """256-bit key of a canonical URL: a full sha256, never a 64-bit hash, so no two URLs share a row by collision."""
    return hashlib.sha256(canonical_url.encode("utf-8", "surrogatepass")).hexdigest()


def request_key(canonical_url: str, method: str = "GET", body: str = "") -> str:
    """The url_key of a request: a GET without a body has its URL's key; another method or a body
    makes a row of its own (two POSTs with different bodies to one URL are two pages)."""
    if method == "GET" and not body:
        return url_key(canonical_url)
    return url_key(f"{method} {canonical_url}\n{body}")


def host_of(url: str) -> str:
    """The URL's host in lower case; "" when it has none or cannot be parsed ("http://[bad"): a
    bad URL is off every site, never an error in a scope check."""
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


@functools.lru_cache(maxsize=4096)  # a page's URL is asked again as its round goes: claimed, sent, answered
def server_of(url: str) -> str:
    """The server a URL's requests go to, as politeness and health name it: the host, with ":port"
    when the port is not the scheme's default ("127.0.0.1:8001"; "example.com" for http on 80 and
    https on 443 alike, as before ports counted). "" when the URL has no host or cannot be parsed."""
    try:
        parts = urlsplit(url)
        host, port = (parts.hostname or "").lower(), parts.port
    except ValueError:
        return ""
    if not host or port is None or port == DEFAULT_PORTS.get(parts.scheme.lower()):
        return host
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    port = parts.port or DEFAULT_PORTS.get(parts.scheme, 0)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


def port_key(url: str) -> int:
    """A URL's port, 0 for its scheme's default port (http's 80 and https' 443 count as one)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return -1  # not a URL or not a port at all: matches no seed's
    return 0 if port is None or port == DEFAULT_PORTS.get(parts.scheme) else port


def host_in_domains(host: str, domains: tuple[str, ...]) -> bool:
    """True when host is one of the domains or a subdomain of one."""
    return any(host == d or host.endswith("." + d) for d in domains)


def parse_lines(text: str) -> list[str]:
    """The non-blank lines of a one-per-line field, stripped. Lines only, never commas: a comma is
    part of a regex ("/p\\d{1,3}\\.html"). Comma-separated fields (media_kinds) split themselves."""
    return [line.strip() for line in (text or "").split("\n") if line.strip()]


@dataclass(frozen=True)
class Scope:
    """What a project may crawl: hosts (and, when built from the seeds' origins, their ports),
    depth and allow/deny patterns."""

    domains: tuple[str, ...]
    max_depth: int | None = None
    allow: tuple[UserPattern, ...] = ()  # matched with a time limit: a match that gave up fails closed
    deny: tuple[UserPattern, ...] = ()
    ports: tuple[tuple[str, frozenset[int]], ...] = ()  # (host, its seeds' port keys); empty: any port

    @classmethod
    def build(cls, *, domains, max_depth=None, allow=(), deny=(), origins=()) -> "Scope":
        """`origins`: the seeds' URLs, when the scope is theirs: a link to another port of their host
        (another server on the same machine, the console's own) is out of scope."""
        ports: dict[str, set[int]] = {}
        for url in origins:
            ports.setdefault(host_of(url), set()).add(port_key(url))
        return cls(
            domains=tuple(d.lower().lstrip(".") for d in domains),
            max_depth=max_depth,
            allow=tuple(UserPattern(p) for p in allow),
            deny=tuple(UserPattern(p) for p in deny),
            ports=tuple((host, frozenset(keys)) for host, keys in sorted(ports.items()) if host),
        )

    def on_other_port(self, url: str) -> bool:
        """Whether a URL of the scope's hosts is on a port none of its seeds use. The scheme's default
        ports count as one, so a site that moved from http to https stays the same site."""
        host, key = host_of(url), port_key(url)
        return not any(key in keys for h, keys in self.ports if host == h or host.endswith("." + h))

    def rejects(self, url: str, depth: int) -> str | None:
        """The reason a canonical URL is out of scope, or None when it is in."""
        if self.max_depth is not None and depth > self.max_depth:
            return "depth"
        if self.domains and not host_in_domains(host_of(url), self.domains):
            return "offsite"
        if self.ports and self.on_other_port(url):
            return "other_port"
        if any(p.hits(url, unsure=True) for p in self.deny):  # a deny pattern that gave up denies
            return "denied"
        if self.allow and not any(p.hits(url, unsure=False) for p in self.allow):
            return "not_allowed"
        return None

    def refusal(self, url: str, depth: int) -> tuple[str, str] | None:
        """`rejects`' code and a sentence naming the limit, domains or pattern behind it, for people
        (the debugger); None when the URL is in scope. `rejects` decides, so the two cannot differ,
        and the crawl's per-link path pays nothing for the words."""
        code = self.rejects(url, depth)
        if code is None:
            return None
        if code == "depth":
            return code, f"depth {depth} is beyond max_depth {self.max_depth}"
        if code == "offsite":
            return code, f"host {host_of(url)} is not in the domains {', '.join(self.domains)}"
        if code == "other_port":
            return code, (
                f"port {urlsplit(url).port or DEFAULT_PORTS.get(urlsplit(url).scheme)} of {host_of(url)} is "
                "not a port of the seeds (name the host in allowed_domains to allow all its ports)"
            )
        if code == "denied":
            return code, "matches deny pattern " + next(p.pattern for p in self.deny if p.search(url))
        return code, "matches none of the allow patterns " + ", ".join(p.pattern for p in self.allow)
