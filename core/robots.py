"""robots.txt decisions per RFC 9309 (protego). Pure: the caller fetches and caches the file."""

from dataclasses import dataclass

from protego import Protego

from core.hrefs import absolute_http_url

MAX_ROBOTS_BYTES = 500 * 1024  # RFC 9309: parse at least 500 KiB
_BYTE_ORDER_MARKS = (b"\xef\xbb\xbf", b"\xef\xbb", b"\xef")  # the whole mark first


@dataclass(frozen=True)
class RobotsPolicy:
    """allow_all / disallow_all short-cut the parser for 4xx and 5xx/unreachable answers."""

    allow_all: bool = False
    disallow_all: bool = False
    parser: Protego | None = None
    error: str = ""  # why robots.txt could not be read (then everything is disallowed)

    def unreadable(self, transient) -> bool:
        """robots.txt could not be read for a reason that passes (a 5xx, or a network error that
        `transient(code)` says is one): the site is off limits for now, not for good."""
        return self.disallow_all and (self.error.startswith("HTTP") or transient(self.error))

    def refusal(self) -> tuple[str, str]:
        """(error_code, message) for a page this policy refuses.

        An unreadable robots.txt is reported with the reason it could not be read (a network error
        code, or robots_unavailable for a 5xx), which the fetch stage retries like any transient error.
        """
        if self.error == "blocked_address":
            return "blocked_address", "the host resolves to a non-public address"
        if self.disallow_all and self.error.startswith("HTTP"):
            return "robots_unavailable", f"robots.txt answered {self.error}: the whole site is off limits for now"
        if self.disallow_all and self.error:
            # Its robots.txt is the first request to a host: a host that is down fails there, and
            # the page has not been refused by any rule.
            return self.error, f"the host was unreachable ({self.error}): not even its robots.txt could be read"
        if self.disallow_all:
            return "robots_unavailable", "robots.txt could not be fetched (no answer)"
        return "robots_disallowed", "robots.txt disallows this URL"

    def allows(self, url: str, user_agent: str, *, as_linked: str = "") -> bool:
        """Whether the rules allow url (the canonical form, which is fetched) and, when given, the URL
        as the site linked it: a rule that spells out a query ("/search?q=") is written against the
        site's own order and escapes, which canonical sorting loses. Either refusal refuses."""
        if self.allow_all:
            return True
        if self.disallow_all or self.parser is None:
            return False
        urls = (url, as_linked) if as_linked and as_linked != url else (url,)
        return all(self.parser.can_fetch(each, user_agent) for each in urls)

    def crawl_delay(self, user_agent: str) -> float | None:
        return self.parser.crawl_delay(user_agent) if self.parser else None

    def sitemaps(self, robots_url: str = "") -> list[str]:
        """The Sitemap: lines as absolute http(s) URLs, relative ones ("/sitemap.xml",
        "//cdn.example/s.xml") resolved against robots_url as Google and Scrapy do. A line that held
        bytes robots_text could not decode (now U+FFFD) names no URL the site has, and is skipped."""
        if not self.parser:
            return []
        urls = (absolute_http_url(robots_url, line) for line in self.parser.sitemaps if "\ufffd" not in line)
        return [url for url in urls if url]


def robots_text(body: bytes) -> str:
    """robots.txt is UTF-8 (RFC 9309); a byte order mark is dropped, or the first line would read
    "\ufeffUser-agent" and its group be lost, and so is the start of one cut short (as Google's
    parser does). Bytes that are not UTF-8 become U+FFFD."""
    for mark in _BYTE_ORDER_MARKS:
        if body.startswith(mark):
            return body[len(mark) :].decode("utf-8", errors="replace")
    return body.decode("utf-8", errors="replace")


def policy_from_response(status_code: int | None, body: str, error: str = "") -> RobotsPolicy:
    """2xx: the rules; 4xx: allow everything; 5xx or no answer: disallow everything."""
    if status_code is None or status_code >= 500:
        return RobotsPolicy(disallow_all=True, error=error or (f"HTTP {status_code}" if status_code else ""))
    if 400 <= status_code < 500:
        return RobotsPolicy(allow_all=True)
    # a body stored before robots_text dropped the byte order mark may still start with it
    return RobotsPolicy(parser=Protego.parse(body[:MAX_ROBOTS_BYTES].removeprefix("\ufeff")))
