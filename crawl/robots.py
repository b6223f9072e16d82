"""robots.txt decisions per RFC 9309 (protego). Pure: the caller fetches and caches the file."""

from dataclasses import dataclass

from protego import Protego

MAX_ROBOTS_BYTES = 500 * 1024  # RFC 9309: parse at least 500 KiB


@dataclass(frozen=True)
class RobotsPolicy:
    """allow_all / disallow_all short-cut the parser for 4xx and 5xx/unreachable answers."""

    allow_all: bool = False
    disallow_all: bool = False
    parser: Protego | None = None
    error: str = ""  # why robots.txt could not be read (then everything is disallowed)

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

    def allows(self, url: str, user_agent: str) -> bool:
        if self.allow_all:
            return True
        if self.disallow_all or self.parser is None:
            return False
        return self.parser.can_fetch(url, user_agent)

    def crawl_delay(self, user_agent: str) -> float | None:
        return self.parser.crawl_delay(user_agent) if self.parser else None

    def sitemaps(self) -> list[str]:
        return list(self.parser.sitemaps) if self.parser else []


def policy_from_response(status_code: int | None, body: str, error: str = "") -> RobotsPolicy:
    """2xx: the rules; 4xx: allow everything; 5xx or no answer: disallow everything."""
    if status_code is None or status_code >= 500:
        return RobotsPolicy(disallow_all=True, error=error or (f"HTTP {status_code}" if status_code else ""))
    if 400 <= status_code < 500:
        return RobotsPolicy(allow_all=True)
    return RobotsPolicy(parser=Protego.parse(body[:MAX_ROBOTS_BYTES]))
