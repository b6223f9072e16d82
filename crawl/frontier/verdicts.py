"""What a stage decided for one row, before the frontier turns it into columns and messages.

Stages say what happened (fetched, done, retry, postpone, fail) and which content columns go with
it (`fields`: status code, title, hashes...); state, lease, attempts and scheduling columns are the
frontier's alone.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings

from core.net.client import is_transient

# Besides the network's transient errors (core.net.client.is_transient): a robots.txt that could not
# be read, a host that asked us to wait, a storage that refused a write, a block page. Pages and
# assets alike.
RETRYABLE = ("robots_unavailable", "host_backoff", "storage_error", "blocked")
# The code of an answer a block rule matched (core/blocks.py): retried later, like a 429.
BLOCKED = "blocked"


@dataclass(frozen=True)
class Link:
    """A URL found on a page (or a seed, sitemap entry, redirect target) that may join the frontier.

    `request`, when not empty, is the new row's `request` JSON (a spider's Request): method, body,
    headers, cookies, route, meta, and two rules for a page already known: `itag` (a done page
    stored with another itag is fetched again) and `age` (a done page fetched longer ago than that
    many seconds is fetched again). `lastmod` is a third such rule, from sitemaps and feeds."""

    url: str
    depth: int
    parent_id: int | None = None
    redirect_hops: int = 0
    kind: str = "page"  # page, sitemap or feed: how the extract stage reads its response
    priority: int = 0  # higher is fetched sooner
    request: dict = field(default_factory=dict, hash=False)
    # A sitemap's <lastmod> or a feed entry's date: a known done page changed since its fetch is
    # fetched again now; one unchanged since is not refetched early (its revisit moves out).
    lastmod: datetime | None = None

    @property
    def method(self) -> str:
        return self.request.get("method", "GET")

    @property
    def body(self) -> str:
        return self.request.get("body", "")

    @property
    def is_plain_get(self) -> bool:
        """A GET without a body: its row is its URL's. Any other request (and a session's login
        request) is a row of its own."""
        return self.method == "GET" and not self.body and "session" not in self.request

    @property
    def key_body(self) -> str:
        """What tells its row apart from other requests to its URL: the body, and the session a login is for."""
        return self.body + (f"\nsession={self.request['session']}" if "session" in self.request else "")

    @property
    def revisits_known(self) -> bool:
        """It may send a page the frontier already has back to the fetch stage (itag, age, lastmod)."""
        return "itag" in self.request or "age" in self.request or self.lastmod is not None


@dataclass
class Fetched:
    """The response is stored: the row goes on to extraction."""

    fields: dict = field(default_factory=dict)


@dataclass
class Done:
    """Nothing more to do for now; `revisit_seconds`: when to look again (recrawl), if ever.
    `awaiting_assets`: done once the page's pending media are downloaded."""

    fields: dict = field(default_factory=dict)
    revisit_seconds: int | None = None
    awaiting_assets: bool = False


@dataclass
class Retry:
    """A transient failure: tried again after a back-off while attempts last, else failed."""

    code: str
    message: str
    fields: dict = field(default_factory=dict)


@dataclass
class Postpone:
    """Not now (politeness, host capacity, Retry-After): back in the queue until `until`, without
    spending an attempt."""

    code: str
    message: str
    until: datetime
    fields: dict = field(default_factory=dict)


@dataclass
class Fail:
    """A failure that trying again will not fix."""

    code: str
    message: str
    fields: dict = field(default_factory=dict)


@dataclass
class Refetch:
    """The stored answer is not what the page needs (a plain fetch of a page that needs a browser):
    fetch it again now, with `fields` (its new request, no validators)."""

    code: str
    message: str
    fields: dict = field(default_factory=dict)


Verdict = Fetched | Done | Retry | Postpone | Fail | Refetch


def retry_or_fail(code: str, message: str, fields: dict | None = None) -> Retry | Fail:
    """The one retry classifier: transient errors are retried (the retry policy below decides when,
    and when to stop); others fail now."""
    if is_transient(code) or code in RETRYABLE:
        return Retry(code, message, fields or {})
    return Fail(code, message, fields or {})


def error_columns(verdict: Retry | Postpone | Fail) -> dict:
    """The error a row keeps for a verdict that did not finish it, cut to its columns' sizes."""
    return {"error_code": verdict.code[:40], "error_message": verdict.message[:2000]}


def retry_later_at(attempts: int, now: datetime) -> datetime:
    """The long retry schedule of pages that are never given up for a transient failure (hubs,
    seeds, pages fetched before): after the short schedule's attempts, CRAWL_RETRY_LONG_SECONDS,
    doubling each time, at most CRAWL_RETRY_MAX_SECONDS apart."""
    extra = max(0, attempts - settings.CRAWL_MAX_ATTEMPTS)
    seconds = min(settings.CRAWL_RETRY_MAX_SECONDS, settings.CRAWL_RETRY_LONG_SECONDS * 2 ** min(extra, 30))
    return now + timedelta(seconds=seconds)


def retry_at(attempts: int, now: datetime, *, cap: int | None = None) -> datetime | None:
    """The one retry policy of pages and assets: after `attempts` tries, when to try again (base *
    2^(attempts-1) seconds, at most an hour), or None when the attempts (`cap`, else
    CRAWL_MAX_ATTEMPTS) are used up."""
    if attempts >= (settings.CRAWL_MAX_ATTEMPTS if cap is None else cap):
        return None
    seconds = min(3600.0, settings.CRAWL_RETRY_BASE_SECONDS * 2 ** max(0, attempts - 1))
    return now + timedelta(seconds=seconds)
