"""Quiet hours of a notification target: a non-urgent message that falls inside them is held
(a HeldNotice row) and sent when they end; urgent ones go at once. Hours are read in the
target's own time zone; a span whose end is before its start runs over midnight (22:00-07:00)."""

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.utils import timezone

from console.health.models import HeldNotice, NotificationTarget


def quiet_problems(start: time | None, end: time | None, zone: str) -> dict[str, str]:
    """What is wrong with a target's quiet hours, by field (empty: nothing)."""
    problems = {}
    if (start is None) != (end is None):
        problems["quiet_until" if end is None else "quiet_from"] = "give both ends of the quiet hours, or neither"
    elif start is not None and start == end:
        problems["quiet_until"] = "quiet hours must end at another time than they start"
    try:
        ZoneInfo(zone or "")
    except (ZoneInfoNotFoundError, ValueError):
        problems["quiet_timezone"] = f"not a time zone: {zone!r} (for example UTC or Europe/Paris)"
    return problems


def quiet_end(target: NotificationTarget, now: datetime) -> datetime | None:
    """When the target's quiet hours that hold at `now` end, or None when `now` is not inside them."""
    start, end = target.quiet_from, target.quiet_until
    if start is None or end is None or start == end:
        return None
    local = now.astimezone(ZoneInfo(target.quiet_timezone or "UTC"))
    clock = local.timetz().replace(tzinfo=None)
    inside = start <= clock < end if start < end else (clock >= start or clock < end)
    if not inside:
        return None
    ends = local.replace(hour=end.hour, minute=end.minute, second=0, microsecond=0)
    if ends <= local:
        ends += timedelta(days=1)
    return ends.astimezone(UTC)


def notice_hold(target: NotificationTarget, *, title: str, body: str, kind: str, until: datetime) -> None:
    HeldNotice.objects.create(target=target, title=title[:300], body=body, kind=kind, send_after=until)


def held_send(*, now: datetime | None = None) -> int:
    """Send the held messages whose quiet hours are over, each once: a row is claimed by deleting it."""
    from console.health.notify import send

    now, sent = now or timezone.now(), 0
    for notice in HeldNotice.objects.filter(send_after__lte=now).select_related("target"):
        if HeldNotice.objects.filter(id=notice.id).delete()[0]:
            send(urls=[notice.target.url], title=notice.title, body=notice.body, kind=notice.kind, email=False)
            sent += 1
    return sent
