"""What an answer says about the session it was sent with: fine, blocked (a status the project
names, or a block another part of the crawl detected), expired (sent back to the login page, or a
page the logged-out selector matches), or an error. Pure: no Django, no network."""

import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

import lxml.html
from cssselect import GenericTranslator, SelectorError

OK, BLOCKED, EXPIRED, ERROR = "", "blocked", "expired", "error"
_STATUS = re.compile(r"[1-5][0-9][0-9]")
_SEPARATORS = re.compile(r"[\s,]+")
SNIFFED_BYTES = 256 * 1024  # the selector reads the head of the body: a logged-out page shows it early


def statuses_of(text: str) -> frozenset[int]:
    """The HTTP statuses in a space- or comma-separated list ("403 429"); ValueError on anything else."""
    words = [word for word in _SEPARATORS.split(text.strip()) if word]
    bad = [word for word in words if not _STATUS.fullmatch(word)]
    if bad:
        raise ValueError(f"not an HTTP status: {', '.join(bad[:3])}")
    return frozenset(int(word) for word in words)


@lru_cache(maxsize=64)
def selector_xpath(selector: str) -> str:
    """The XPath of a CSS selector; ValueError when it is not one."""
    try:
        return GenericTranslator().css_to_xpath(selector)
    except SelectorError as exc:
        raise ValueError(f"not a CSS selector: {exc}") from None


@dataclass(frozen=True)
class SessionRules:
    """A project's rules for telling that a session is spent."""

    login_url: str = ""
    expired_selector: str = ""
    retire_statuses: frozenset[int] = frozenset()

    def judge(self, *, status: int | None, location: str, content_type: str, body: bytes, blocked: bool = False) -> str:
        """OK, BLOCKED, EXPIRED or ERROR for one answer. `blocked`: block detection said so."""
        if blocked or status in self.retire_statuses:
            return BLOCKED
        if status is None or status >= 500:
            return ERROR
        if location and self.login_url and _same_page(location, self.login_url):
            return EXPIRED
        if self.expired_selector and "html" in content_type and _matches(self.expired_selector, body):
            return EXPIRED
        return OK

    def is_login_page(self, url: str) -> bool:
        return bool(self.login_url) and _same_page(url, self.login_url)


def _same_page(url: str, other: str) -> bool:
    """Same host and path (the login page's query, a return-to address, may differ)."""
    a, b = urlsplit(url), urlsplit(other)
    return (a.hostname, a.port, a.path.rstrip("/")) == (b.hostname, b.port, b.path.rstrip("/"))


def _matches(selector: str, body: bytes) -> bool:
    try:
        document = lxml.html.fromstring(body[:SNIFFED_BYTES])
        return bool(document.xpath(selector_xpath(selector)))
    except (ValueError, lxml.etree.ParserError):
        return False
