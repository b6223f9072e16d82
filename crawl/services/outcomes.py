"""What one fetch result does to its page row: fetched, unchanged (304), retried later, or failed."""

import hashlib
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from crawl.fetcher import FetchResponse, is_transient
from crawl.models import Page, Project

from .freshness import unchanged

RETRYABLE_EXTRA = ("robots_unavailable", "host_backoff")


def outcome(page: Page, response: FetchResponse, backoff_until: datetime | None = None) -> dict:
    """The row changes for one response. backoff_until: the host asked us to wait (Retry-After)."""
    now = timezone.now()
    base = {
        "fetched_at": now,
        "error_code": "",
        "error_message": "",
        "fetch_ms": int(response.elapsed * 1000),
        "fetch_count": F("fetch_count") + 1,
    }
    if response.status_code == 304:  # unchanged: nothing new is stored, the page is revisited later
        return base | unchanged(page.project, page) | {"not_modified_at": now}
    if response.status_code is not None:
        base |= {
            "status_code": response.status_code,
            "content_type": response.content_type[:200],
            "final_url": response.location or page.url,
        }
    code, message = error_of(response)
    if backoff_until is not None and (code in ("http_429", "http_503", "host_backoff")):
        return base | postpone(code, message, backoff_until)
    if code:
        return base | failure(page, code, message)
    body_sha256 = hashlib.sha256(response.body).hexdigest()
    if body_sha256 == page.content_sha256 and page.itag == rules_stamp(page.project) and page.fetch_count:
        return base | unchanged(page.project, page)  # the same bytes, extracted with the same rules
    return base | {
        "state": Page.State.FETCHED,
        "enqueued_at": now,
        "content_length": len(response.body),
        "content_sha256": body_sha256,
        "etag": response.headers.get("etag", "")[:500],
        "last_modified": response.headers.get("last-modified", "")[:100],
    }


def failure(page: Page, code: str, message: str) -> dict:
    """Transient errors go back to the queue with backoff until attempts run out; others fail now."""
    changes = {"error_code": code, "error_message": message[:2000]}
    retryable = is_transient(code) or code in RETRYABLE_EXTRA
    if retryable and page.attempts < settings.CRAWL_MAX_ATTEMPTS:
        retry_at = timezone.now() + backoff(page.attempts)
        return changes | {"state": Page.State.QUEUED, "enqueued_at": None, "next_fetch_at": retry_at}
    return changes | {"state": Page.State.FAILED}


def postpone(code: str, message: str, until: datetime) -> dict:
    """Back to the queue until `until`, without spending an attempt (politeness, not failure)."""
    return {
        "state": Page.State.QUEUED,
        "enqueued_at": None,
        "next_fetch_at": until,
        "attempts": F("attempts") - 1,
        "error_code": code,
        "error_message": message[:2000],
    }


def error_of(response: FetchResponse) -> tuple[str, str]:
    if response.error_code:
        return response.error_code, response.error_message
    status = response.status_code
    if status >= 400:
        return f"http_{status}", f"HTTP {status}"
    if 300 <= status < 400 and not response.location:
        return "bad_redirect", f"HTTP {status} without a Location header"
    return "", ""


def backoff(attempts: int) -> timedelta:
    return timedelta(seconds=min(3600, settings.CRAWL_RETRY_BASE_SECONDS * 2 ** max(0, attempts - 1)))


def rules_stamp(project: Project) -> str:
    """What a page was extracted with (pyspider's itag): a change of the rules makes it due again."""
    return project.rules_changed_at.isoformat() if project.rules_changed_at else ""
