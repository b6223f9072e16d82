"""Work that must wait (politeness, host capacity, Retry-After, retry back-off) is published again
when it becomes due, as a message with a countdown: the row stays the truth (`next_fetch_at`), and
a wake-up that finds nothing due claims nothing. Waits longer than CRAWL_WAKEUP_MAX_SECONDS (kept
well under the broker's visibility timeout, so a delayed message is never delivered twice) carry
no message: the reaper hands them out once due."""

from collections import defaultdict
from datetime import datetime

from django.conf import settings


def wakeup_at(due: datetime, now: datetime) -> datetime | None:
    """The `enqueued_at` of a row that waits until `due`: the time its wake-up message runs, or
    None when the wait is too long for a message."""
    return due if (due - now).total_seconds() <= settings.CRAWL_WAKEUP_MAX_SECONDS else None


def waiting_until(due: datetime, now: datetime) -> dict:
    """The columns of a row that waits until `due` (postponed or retried), pages and assets alike."""
    return {"next_fetch_at": due, "enqueued_at": wakeup_at(due, now)}


def wakeups_group(rows: list[tuple[int, datetime]], now: datetime) -> dict[float, list[int]]:
    """Ids grouped by the countdown (whole tenths of a second, a little after due) of their message."""
    groups = defaultdict(list)
    for row_id, due in rows:
        seconds = max(0.0, (due - now).total_seconds())
        groups[round(seconds + 0.05, 1)].append(row_id)
    return groups
