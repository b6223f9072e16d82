"""What a stage decided for one row, before the frontier turns it into columns and messages.

Stages say what happened (fetched, done, retry, postpone, fail) and which content columns go with
it (`fields`: status code, title, hashes...); state, lease, attempts and scheduling columns are the
frontier's alone.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings


@dataclass(frozen=True)
class Link:
    """A URL found on a page (or a seed, sitemap entry, redirect target) that may join the frontier."""

    url: str
    depth: int
    parent_id: int | None = None
    redirect_hops: int = 0
    kind: str = "page"  # page, sitemap or feed: how the extract stage reads its response
    priority: int = 0  # higher is fetched sooner


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


Verdict = Fetched | Done | Retry | Postpone | Fail


def error_columns(verdict: Retry | Postpone | Fail) -> dict:
    """The error a row keeps for a verdict that did not finish it, cut to its columns' sizes."""
    return {"error_code": verdict.code[:40], "error_message": verdict.message[:2000]}


def retry_at(attempts: int, now: datetime) -> datetime | None:
    """The one retry policy of pages and assets: after `attempts` tries, when to try again (base *
    2^(attempts-1) seconds, at most an hour), or None when the attempts are used up."""
    if attempts >= settings.CRAWL_MAX_ATTEMPTS:
        return None
    seconds = min(3600.0, settings.CRAWL_RETRY_BASE_SECONDS * 2 ** max(0, attempts - 1))
    return now + timedelta(seconds=seconds)
