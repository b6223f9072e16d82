"""Work that must wait (politeness, host capacity, Retry-After, retry back-off) is published again
when it becomes due, as a message with a countdown: the row stays the truth (`next_fetch_at`), and
a wake-up that finds nothing due claims nothing. Waits longer than CRAWL_WAKEUP_MAX_SECONDS (kept
well under the broker's visibility timeout, so a delayed message is never delivered twice) carry
no message: the reaper hands them out once due."""

from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connections
from django.db.models import Q
from django.utils import timezone

from crawl.models import StageWakeup


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


# A wake-up this far past its time is taken as lost (a killed worker's prefetch, a restarted broker):
# the next request for one sends a new message.
WAKEUP_STALE_SECONDS = 5.0


def wakeup_book(queue: str, at: datetime, now: datetime) -> bool:
    """Book the queue's next wake-up at `at`: True when the caller must send it, False when one is
    already on its way for `at` or sooner. One conditional upsert of the queue's row, so two
    workers asking at once send one message."""
    stale = now - timedelta(seconds=WAKEUP_STALE_SECONDS)
    connection = connections[StageWakeup.objects.db]
    table = connection.ops.quote_name(StageWakeup._meta.db_table)
    field = StageWakeup._meta.get_field("due_at")
    at_value, stale_value = (field.get_db_prep_save(value, connection) for value in (at, stale))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (queue, due_at) VALUES (%s, %s) ON CONFLICT (queue) DO UPDATE"
            f" SET due_at = excluded.due_at WHERE {table}.due_at IS NULL OR {table}.due_at > excluded.due_at"
            f" OR {table}.due_at < %s RETURNING id",
            [queue, at_value, stale_value],
        )
        return cursor.fetchone() is not None


def wakeup_taken(queue: str, booked_at: datetime) -> None:
    """The wake-up booked for `booked_at` runs now: that booking, or an earlier one still on the
    row, is spent (this run claims what either was for). A later booking stays: its own message
    comes."""
    StageWakeup.objects.filter(queue=queue, due_at__lte=booked_at).update(due_at=None)


def session_take(key: str, until: datetime) -> bool:
    """Hold the session `key` (one process keeps claiming a stage's work) until `until`, unless a
    live session holds it; a holder that died frees it when its time is up."""
    now = timezone.now()
    StageWakeup.objects.get_or_create(queue=key)
    free = Q(due_at__isnull=True) | Q(due_at__lt=now)
    return bool(StageWakeup.objects.filter(free, queue=key).update(due_at=until))


def session_leave(key: str, until: datetime) -> None:
    StageWakeup.objects.filter(queue=key, due_at=until).update(due_at=None)
