"""What one fetch result means for its page: fetched, unchanged (304, or the same bytes), retried
later, postponed (the host asked us to wait), or failed. Verdicts only: the frontier writes them."""

import hashlib
from datetime import datetime

from django.db.models import F
from django.utils import timezone

from core.blocks import Blocked
from core.net.client import FetchResponse
from crawl.frontier.verdicts import BLOCKED, Done, Fetched, Postpone, Retry, Verdict, retry_or_fail
from crawl.hosts.codes import BACKOFF_CODES
from crawl.models import Page
from crawl.policy import rules_stamp
from crawl.services.freshness import revisit


def outcome(
    page: Page, response: FetchResponse, backoff_until: datetime | None = None, blocked: Blocked | None = None
) -> Verdict:
    """The verdict on one response. backoff_until: the host asked us to wait (Retry-After), or is
    held back for its answers; blocked: a block rule matched the answer (core/blocks.py)."""
    now = timezone.now()
    base = {"fetched_at": now, "fetch_ms": int(response.elapsed * 1000), "fetch_count": F("fetch_count") + 1}
    if response.status_code == 304:  # unchanged: nothing new is stored, the page is revisited later
        return Done(base | {"not_modified_at": now}, revisit_seconds=revisit(page.project, page, changed=False))
    if response.status_code is not None:
        base |= {
            "status_code": response.status_code,
            "content_type": response.content_type[:200],
            "final_url": response.location or page.url,
        }
    if blocked is not None:  # neither stored nor parsed: tried again once the host's hold ends, like a 429
        message = f"blocked by rule '{blocked.rule}': {blocked.reason}"
        if backoff_until is not None:
            return Postpone(BLOCKED, message, backoff_until, base)
        return Retry(BLOCKED, message, base)
    code, message = error_of(response)
    if backoff_until is not None and code in BACKOFF_CODES:
        return Postpone(code, message, backoff_until, base)
    if code:
        return retry_or_fail(code, message, base)
    body_sha256 = hashlib.sha256(response.body).hexdigest()
    if body_sha256 == page.content_sha256 and page.itag == rules_stamp(page.project) and page.fetch_count:
        return Done(base, revisit_seconds=revisit(page.project, page, changed=False))  # same bytes, same rules
    return Fetched(
        base
        | {
            "content_length": len(response.body),
            "content_sha256": body_sha256,
            "etag": response.headers.get("etag", "")[:500],
            "last_modified": response.headers.get("last-modified", "")[:100],
        }
    )


def error_of(response: FetchResponse) -> tuple[str, str]:
    if response.error_code:
        return response.error_code, response.error_message
    status = response.status_code
    if status >= 400:
        return f"http_{status}", f"HTTP {status}"
    if 300 <= status < 400 and not response.location:
        return "bad_redirect", f"HTTP {status} without a Location header"
    return "", ""
