"""Quiet hours of a notification target: a non-urgent message that falls inside them is held
(a HeldNotice row) and sent when they end (held_send, console/health/notify.py); urgent ones go at
once. Hours are read in the target's own time zone; a span whose end is before its start runs over
midnight (22:00-07:00)."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from console.health.models import HeldNotice, NotificationTarget


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
