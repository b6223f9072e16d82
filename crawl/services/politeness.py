"""Politeness shared by every worker, kept in the database (works the same embedded and distributed).

Per host: a minimum delay between request starts (the project's, a per-host override, or robots.txt
Crawl-delay, whichever is largest), handed out as time slots reserved under a row lock, and a
back-off set by 429/503 Retry-After. Per project: a token bucket (rate + burst) over all hosts.
A batch reserves slots for at most HORIZON_SECONDS ahead; pages it cannot serve in that window
go back to the queue with next_fetch_at at their host's next free slot, so no worker sleeps long.
"""

import math
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from crawl.models import Host, HostLease, Project

HORIZON_SECONDS = 60.0
SLOT_MARGIN = 0.1  # seconds added to each slot: scheduling jitter must never bring two requests closer than the delay
MAX_BACKOFF_SECONDS = 3600.0
BUSY_RETRY_SECONDS = 2.0


@dataclass
class HostPlan:
    """What one batch may send to one host: `granted` requests, the first at start_at, then one
    every `spacing` seconds; `refused` names why none may be sent at all."""

    host: str
    start_at: datetime
    spacing: float = 0.0
    granted: int = 0
    retry_at: datetime | None = None  # when the requests not granted now may be tried
    refused: str = ""
    in_flight: int = 1  # requests this batch may have open to the host at once (held by a HostLease)

    def slot(self, index: int) -> float:
        return self.start_at.timestamp() + index * self.spacing


def horizon_seconds() -> float:
    """How far ahead a batch may book slots: well inside its lease, so a waiting batch keeps it."""
    return min(HORIZON_SECONDS, settings.CRAWL_LEASE_SECONDS / 3)


def hosts_plan(
    *, project: Project, wanted: dict[str, int], crawl_delays: dict[str, float | None], token: uuid.UUID
) -> dict[str, HostPlan]:
    """Reserve request slots and in-flight capacity on each host (row locks taken in host order:
    no deadlocks). The capacity is held by a HostLease under `token`: hosts_release(token) frees it."""
    Host.objects.bulk_create([Host(host=h) for h in sorted(wanted)], ignore_conflicts=True)
    with transaction.atomic():
        plans = {h: _reserve(project, h, wanted[h], crawl_delays.get(h), token) for h in sorted(wanted)}
    if project.rate_limit > 0:
        _apply_bucket(project, plans)
    return plans


def hosts_release(token: uuid.UUID) -> None:
    """The batch is done with its hosts: its in-flight capacity goes back to the other workers."""
    HostLease.objects.filter(token=token).delete()


def _reserve(project: Project, host: str, wanted: int, crawl_delay: float | None, token) -> HostPlan:
    row = Host.objects.select_for_update().get(host=host)
    now = timezone.now()
    if row.blocked:
        return HostPlan(host=host, start_at=now, refused=row.blocked_reason or "blocked by an operator")
    free = _free_capacity(project, row, now)
    if free <= 0:  # other workers hold every connection the host allows: come back shortly
        return HostPlan(host=host, start_at=now, retry_at=now + timedelta(seconds=BUSY_RETRY_SECONDS))
    robots_delay = (crawl_delay or 0.0) if project.obey_robots else 0.0
    delay = max(project.min_delay, row.min_delay or 0.0, robots_delay)
    start = max(now, row.next_allowed_at, row.backoff_until or now)
    wait, horizon = (start - now).total_seconds(), horizon_seconds()
    spacing = delay + SLOT_MARGIN if delay > 0 else 0.0
    if wait > horizon:
        granted = 0
    elif spacing:
        granted = min(wanted, int((horizon - wait) // spacing) + 1)
    else:
        granted = wanted
    next_free = start + timedelta(seconds=granted * spacing)
    # Never hold more of the host than this batch can use (its fetch concurrency): the rest stays
    # free for other workers' batches, which would otherwise be sent back to wait for it.
    in_flight = max(1, min(free, granted, project.concurrency))
    plan = HostPlan(
        host=host, start_at=start, spacing=spacing, granted=granted, retry_at=next_free, in_flight=in_flight
    )
    if granted:
        lease_end = now + timedelta(seconds=settings.CRAWL_LEASE_SECONDS)
        HostLease.objects.create(host=host, token=token, slots=in_flight, expires_at=lease_end)
    if spacing and granted:
        row.next_allowed_at = next_free
    row.crawl_delay = crawl_delay
    row.save(update_fields=["next_allowed_at", "crawl_delay", "updated_at"])
    return plan


def _free_capacity(project: Project, row: Host, now: datetime) -> int:
    """Requests the host may still have open: its cap less what live leases of any worker hold."""
    cap = min(project.max_per_host, row.max_in_flight or project.max_per_host)
    used = HostLease.objects.filter(host=row.host, expires_at__gt=now).aggregate(n=Sum("slots"))["n"] or 0
    return cap - used


def _apply_bucket(project: Project, plans: dict[str, HostPlan]) -> None:
    """Take tokens for the granted requests; what the bucket cannot pay for waits for the refill."""
    with transaction.atomic():
        row = Project.objects.select_for_update().get(id=project.id)
        now = timezone.now()
        elapsed = (now - row.bucket_updated_at).total_seconds() if row.bucket_updated_at else math.inf
        tokens = min(float(row.rate_burst), row.bucket_tokens + elapsed * row.rate_limit)
        for plan in sorted(plans.values(), key=lambda p: p.host):
            paid = min(plan.granted, int(tokens))
            tokens -= paid
            if paid < plan.granted:
                refill = now + timedelta(seconds=(plan.granted - paid) / row.rate_limit)
                plan.granted, plan.retry_at = paid, max(plan.retry_at or refill, refill)
        Project.objects.filter(id=row.id).update(bucket_tokens=tokens, bucket_updated_at=now)


def host_back_off(*, host: str, seconds: float, status: int) -> datetime:
    """A 429/503 with Retry-After: no worker sends to this host before the returned time."""
    until = timezone.now() + timedelta(seconds=min(MAX_BACKOFF_SECONDS, seconds))
    with transaction.atomic():
        row, _ = Host.objects.select_for_update().get_or_create(host=host)
        row.backoff_until = max(until, row.backoff_until or until)
        row.last_status = status
        row.save(update_fields=["backoff_until", "last_status", "updated_at"])
    return row.backoff_until
