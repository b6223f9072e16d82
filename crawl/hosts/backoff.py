"""Back-off that forgives: how a host's throttling incidents, holds and probes are counted, and why
a host is slow, in words. Works on Host rows the caller has locked (crawl/hosts/politeness.py
writes them) or only reads.

A 429/503 without Retry-After is an incident: the host's extra delay doubles once per incident
window (eight answers of one burst in flight are one incident), the host is held that long with
jitter, and after a quiet period without such answers the delay is back at the configured floor.
A host that stopped answering is down: its pages wait, and one request (a probe, a circuit
breaker's half-open state) goes every CRAWL_HOST_PROBE_SECONDS while it is held back.
"""

import random
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Exists, OuterRef, Q

from crawl.models import Host, Page

THROTTLE_START_SECONDS, THROTTLE_MAX_SECONDS = 1.0, 60.0
THROTTLE_JITTER = 0.25  # a hold lasts its delay times 1 to 1 + this, so held hosts do not all come back at once


def throttle_now(row: Host, now: datetime) -> float:
    """The host's extra delay now: none once the quiet period since its last incident has passed."""
    if row.throttled_at is None or row.throttle_delay <= 0:
        return max(0.0, row.throttle_delay)
    return 0.0 if row.throttled_at <= forgiven_before(now) else row.throttle_delay


def forgiven_before(now: datetime) -> datetime:
    """A host whose last incident is older than this has its delay back at the floor."""
    return now - timedelta(seconds=settings.CRAWL_THROTTLE_FORGIVE_SECONDS)


def jittered(seconds: float) -> float:
    return seconds * (1.0 + random.uniform(0.0, THROTTLE_JITTER))


def throttle_incident(row: Host, now: datetime, *, reason: str) -> None:
    """One 429/503 without Retry-After (or a page found blocked): a new incident doubles the host's
    extra delay (from THROTTLE_START_SECONDS, at most THROTTLE_MAX_SECONDS); an answer within the
    window of the current incident (a request that was in flight) only holds the host again."""
    window_end = row.throttle_since and row.throttle_since + timedelta(seconds=settings.CRAWL_THROTTLE_WINDOW_SECONDS)
    if window_end is None or now >= window_end or throttle_now(row, now) == 0.0:
        row.throttle_delay = min(THROTTLE_MAX_SECONDS, max(THROTTLE_START_SECONDS, 2 * throttle_now(row, now)))
        row.throttle_since = now
    row.throttled_at, row.slow_reason = now, reason[:200]
    until = now + timedelta(seconds=jittered(row.throttle_delay))
    row.backoff_until = max(until, row.backoff_until or until)


THROTTLE_FIELDS = ("throttle_delay", "throttle_since", "throttled_at", "slow_reason", "backoff_until")


def is_probing(row: Host, now: datetime) -> bool:
    """The host is down and held back: its requests are probes, one per CRAWL_HOST_PROBE_SECONDS."""
    return row.down_since is not None and row.backoff_until is not None and row.backoff_until > now


def probe_due(row: Host, now: datetime) -> bool:
    """A down, held host whose next probe may go now (one request, the others wait for the hold)."""
    return is_probing(row, now) and (row.probe_at is None or row.probe_at <= now)


def next_probe(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.CRAWL_HOST_PROBE_SECONDS)


def host_slowness(row: Host, now: datetime) -> dict | None:
    """Why the host is slow now and until when ({"why": words, "until": time or None, "delay":
    extra seconds between requests}), or None when nothing slows it beyond its configured delay."""
    extra = throttle_now(row, now)
    if row.blocked:
        return {"why": f"blocked: {row.blocked_reason or 'by an operator'}", "until": None, "delay": extra}
    if row.down_since is not None:
        probe = row.probe_at if row.probe_at and row.probe_at > now else None
        why = f"down since {row.down_since:%H:%M:%S} UTC ({row.slow_reason or 'no answer'})"
        if is_probing(row, now):
            why += f": its pages wait; probed every {settings.CRAWL_HOST_PROBE_SECONDS:g} s"
            why += f", next at {probe:%H:%M:%S} UTC" if probe else ""
        return {"why": why, "until": row.backoff_until if is_probing(row, now) else probe, "delay": extra}
    held = row.backoff_until if row.backoff_until and row.backoff_until > now else None
    if not extra and held is None:
        return None
    why = f"slowed down after {row.slow_reason or 'HTTP 429/503'}"
    if extra:
        back_at = row.throttled_at + timedelta(seconds=settings.CRAWL_THROTTLE_FORGIVE_SECONDS)
        why += f": +{extra:.2g} s between requests until {back_at:%H:%M:%S} UTC if no new incident"
    if held is not None:
        why += f"; held until {held:%H:%M:%S} UTC"
    until = max(t for t in (held, back_at if extra else None) if t is not None)
    return {"why": why, "until": until, "delay": extra}


def hosts_slowed(*, project_id: int, now: datetime, limit: int = 20) -> list[dict]:
    """The project's hosts that something slows beyond their configured delay (the dashboard's
    line per host): {"host", "why", "until" (ISO, or None), "delay"}."""
    slowed = Q(throttle_delay__gt=0) | Q(backoff_until__gt=now) | Q(down_since__isnull=False) | Q(blocked=True)
    mine = Exists(Page.objects.filter(project_id=project_id, host=OuterRef("host")))
    rows = []
    for row in Host.objects.filter(slowed).filter(mine).order_by("host")[:limit]:
        if (slow := host_slowness(row, now)) is not None:
            until = slow["until"].isoformat() if slow["until"] else None
            rows.append({"host": row.host, "why": slow["why"], "until": until, "delay": slow["delay"]})
    return rows
