"""Politeness shared by every worker, kept in the database (works the same embedded and distributed).

Per host: a minimum delay between request starts (the project's, a per-host override, or robots.txt
Crawl-delay, whichever is largest), handed out as time slots booked under a row lock by the claim
that takes the pages, and a back-off set by 429/503 Retry-After. Per project: a token bucket (rate +
burst) over all hosts. A claim books slots at most GRANT_AHEAD_SECONDS ahead; a host's other pages
wait in the database with next_fetch_at at their own next free slots, so no worker sleeps on a
host, and the claim that comes then takes them.
"""

import math
import random
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, FloatField, PositiveIntegerField, Q, Sum, Value, When
from django.db.models.functions import Greatest
from django.utils import timezone

from core.batchsql import upsert
from crawl.frontier.probes import pages_host_back
from crawl.hosts.server_groups import budgets_of
from crawl.models import Host, HostLease, Project

from .backoff import (
    THROTTLE_FIELDS,
    THROTTLE_START_SECONDS,
    forgiven_before,
    is_probing,
    next_probe,
    probe_due,
    throttle_incident,
    throttle_now,
)

GRANT_AHEAD_SECONDS = 1.0  # a fetch session books slots this far ahead: its requests wait on the event loop
SLOT_MARGIN = 0.1  # seconds added to each slot: scheduling jitter must never bring two requests closer than the delay
MAX_BACKOFF_SECONDS = 3600.0
UNKNOWN_DELAY_SECONDS = 1.0  # a host whose robots.txt is not read yet gets one request; its others wait this long
NOW_SECONDS = 0.05  # a slot this close counts as now
# A polite host's first slot is booked this far from the claim, so the request is on time at its slot
# after the claim's own writes (a request later than its slot is not sent).
LEAD_SECONDS = 0.25
# Polite hosts' slots booked by one claim start at least this far apart: one event loop sends the
# requests one after another (about a millisecond each on a busy machine), so fifty hosts whose
# slots fell on one instant saw the last ones sent past their slot, and they waited a delay more.
STAGGER_SECONDS = 0.003


@dataclass
class HostGrant:
    """What one claim may send to one host for one project: `granted` requests, the first at
    start_at, then one every `spacing` seconds; the other pages wait until `later` (each its own
    slot, `spacing` apart), or stay due (`later` None: the host's connections are all in use);
    `refused` names why none may be sent at all."""

    host: str
    start_at: datetime
    spacing: float = 0.0
    granted: int = 0
    later: datetime | None = None
    refused: str = ""
    in_flight: int = 1  # requests this batch may have open to the host at once (held by a HostLease)

    def slot(self, index: int) -> float:
        return self.start_at.timestamp() + index * self.spacing

    def free_slot(self, index: int) -> datetime:
        """The host's `index`-th free slot after this claim's, before the pages already waiting
        there (for a page of higher priority than theirs)."""
        if not self.spacing or self.later is None:
            return self.later or self.start_at
        return self.start_at + timedelta(seconds=(self.granted + index) * self.spacing)

    def waits(self, count: int) -> list[datetime]:
        """Start times for `count` pages that wait: the host's next free slots, in order."""
        if self.later is None:
            return []
        return [self.later + timedelta(seconds=i * self.spacing) for i in range(count)]


def hosts_grant(
    *, wanted: dict[tuple[str, int], int], projects: dict[int, Project], token: uuid.UUID, ahead: float
) -> dict[tuple[str, int], HostGrant]:
    """Book request slots and in-flight capacity on each (host, project) a claim wants pages of,
    in the caller's transaction: host rows are locked in host order (no deadlocks), and a host's
    pages beyond what may start now get the host's next free slots (`slotted_until` remembers how
    far they go, so the next claim's pages queue behind them). The capacity is held by HostLeases
    under `token`: hosts_release(token) frees it. `ahead`: how far ahead slots may be booked (at
    most GRANT_AHEAD_SECONDS; 0: only requests that may start now). Projects sharing a host are
    served the smallest demand first (ties in random order), so a project's one due hub is not
    starved of the host's capacity by another project's batch claim after claim. A host is a server
    (host and port); a project that groups servers books its slots and connections on the group's
    row too (server_groups.budgets_of), so one machine under two names gets one budget."""
    now = timezone.now()
    budgets = budgets_of(wanted, projects)
    names = sorted({host for host, _ in wanted} | set(budgets.values()))
    Host.objects.bulk_create([Host(host=h) for h in names], ignore_conflicts=True)
    rows = {row.host: row for row in Host.objects.select_for_update().filter(host__in=names).order_by("host")}
    booked = {host: (row.next_allowed_at, row.slotted_until, row.probe_at) for host, row in rows.items()}
    used = _in_flight(sorted(set(budgets.values())), now)
    grants, leases, planned = {}, [], set()
    for host, project_id in sorted(wanted, key=lambda key: (key[0], wanted[key], random.random())):
        shared = rows[budgets[(host, project_id)]]
        project, count = projects[project_id], wanted[(host, project_id)]
        grant = _grant(project, rows[host], shared, count, now, used, ahead, planned)
        grants[(host, project_id)] = grant
        if grant.granted:
            used[shared.host] = used.get(shared.host, 0) + grant.in_flight
            lease_end = _lease_end(now)
            leases.append(
                HostLease(host=shared.host, server=host, token=token, slots=grant.in_flight, expires_at=lease_end)
            )
    HostLease.objects.bulk_create(leases)
    changed = [row for h, row in rows.items() if (row.next_allowed_at, row.slotted_until, row.probe_at) != booked[h]]
    fields = ("next_allowed_at", "slotted_until", "probe_at")
    upsert(Host, changed, conflict_fields=("host",), update_fields=fields, now=now)
    for project_id in {p for _, p in wanted}:
        if projects[project_id].rate_limit > 0:
            _apply_bucket(projects[project_id], {h: g for (h, p), g in grants.items() if p == project_id})
    return grants


def hosts_release(token: uuid.UUID, *, hosts: list[str] | None = None) -> None:
    """The claim is done with its hosts (or with those of `hosts`): their in-flight capacity goes
    back to the other workers."""
    leases = HostLease.objects.filter(token=token)
    (leases.filter(server__in=hosts) if hosts is not None else leases).delete()


def hosts_learn_delays(delays: dict[str, float | None]) -> dict[str, datetime]:
    """Remember each host's robots.txt Crawl-delay (0 for none), so claims can book its slots. A
    host's first request was granted before its delay was known: it must start within
    LEAD_SECONDS, and the host's next slot is one delay after that. Returns {host: the latest start
    of its first request} for the hosts whose (nonzero) delay was learned now."""
    known = dict(Host.objects.filter(host__in=list(delays)).values_list("host", "crawl_delay"))
    first_by = timezone.now() + timedelta(seconds=LEAD_SECONDS)
    learned, by_delay = {}, defaultdict(list)
    for host, delay in delays.items():
        if host in known and known[host] != (delay or 0.0):
            by_delay[delay or 0.0].append(host)
    for delay, hosts in sorted(by_delay.items()):  # one statement per distinct delay, not per host
        rows = Host.objects.filter(host__in=sorted(hosts))
        if not delay:  # no Crawl-delay: nothing to space
            rows.update(crawl_delay=0.0)
            continue
        after_first = first_by + timedelta(seconds=delay + SLOT_MARGIN)
        rows.update(crawl_delay=delay, next_allowed_at=Greatest("next_allowed_at", Value(after_first)))
        learned |= dict.fromkeys(hosts, first_by)
    return learned


def _lease_end(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.CRAWL_LEASE_SECONDS)


def _in_flight(hosts: list[str], now: datetime) -> dict[str, int]:
    """Requests each budget (a server's own, or a group's) has open now, by live leases of any worker."""
    live = HostLease.objects.filter(host__in=hosts, expires_at__gt=now).values("host").annotate(n=Sum("slots"))
    return {row["host"]: row["n"] for row in live}


def host_cap(project: Project, row: Host, shared: Host | None = None) -> int:
    """Requests the host may have in flight, all workers: the host's own max_in_flight (or its
    group's, the smaller), an operator's override in either direction, else the project's max_per_host."""
    overrides = [r.max_in_flight for r in (row, shared or row) if r.max_in_flight]
    return min(overrides) if overrides else project.max_per_host


def _grant(
    project: Project,
    row: Host,
    shared: Host,
    wanted: int,
    now: datetime,
    used: dict[str, int],
    ahead: float,
    planned: set[int],
) -> HostGrant:
    """The grant of one (server, project): `row` is the server's, `shared` the budget's it books on
    (the same row unless the project groups servers). Both rows' blocks, back-offs and delays hold,
    and both rows' next slot moves, so a grouped project's requests are spaced from everyone's."""
    if row.blocked or shared.blocked:
        reason = row.blocked_reason if row.blocked else shared.blocked_reason
        return HostGrant(host=row.host, start_at=now, refused=reason or "blocked by an operator")
    spacing = max(_spacing(project, row, now), _spacing(project, shared, now))
    earliest = now + timedelta(seconds=LEAD_SECONDS if spacing else 0.0)
    probe = probe_due(row, now)  # a down server's probe: one request before its hold ends
    start = max(earliest, row.next_allowed_at, shared.next_allowed_at, now if probe else row.backoff_until or now)
    if shared is not row:
        start = max(start, shared.backoff_until or now)
    if spacing:
        start = _staggered(start, planned)
    wait = (start - earliest).total_seconds()
    free = host_cap(project, row, shared) - used.get(shared.host, 0)
    if free <= 0:  # other batches hold every connection the host allows: these stay due
        return HostGrant(host=row.host, start_at=start, spacing=spacing)
    if wait > ahead + NOW_SECONDS:
        granted = 0
    elif spacing:
        granted = min(wanted, int((ahead - max(0.0, wait - NOW_SECONDS)) // spacing) + 1)
    else:
        granted = wanted
    if probe or (project.obey_robots and row.crawl_delay is None):
        granted = min(granted, 1)  # one probe; or learn the Crawl-delay from the first answer before booking more
    next_free = start + timedelta(seconds=granted * spacing)
    grant = HostGrant(host=row.host, start_at=start, spacing=spacing, granted=granted)
    grant.in_flight = max(1, min(free, granted, project.concurrency))
    if spacing and granted:
        row.next_allowed_at = shared.next_allowed_at = next_free
    if probe and granted:  # the others wait for the hold, or for the probe's answer to end it
        row.probe_at, next_free = next_probe(now), max(next_free, row.backoff_until)
    if granted < wanted:
        grant.later = _queue_behind(shared, next_free, wanted - granted, spacing, now)
    return grant


def _staggered(start: datetime, planned: set[int]) -> datetime:
    """`start`, or a little later, so that no other slot of the claim (`planned`: the STAGGER_SECONDS
    steps taken) is within STAGGER_SECONDS of it. Later is always polite."""
    step = math.ceil(start.timestamp() / STAGGER_SECONDS)
    while step in planned:
        step += 1
    planned.add(step)
    return datetime.fromtimestamp(step * STAGGER_SECONDS, tz=start.tzinfo)


def _spacing(project: Project, row: Host, now: datetime) -> float:
    robots_delay = (row.crawl_delay or 0.0) if project.obey_robots else 0.0
    delay = max(project.min_delay, row.min_delay or 0.0, robots_delay) + throttle_now(row, now)
    return delay + SLOT_MARGIN if delay > 0 else 0.0


def _queue_behind(row: Host, next_free: datetime, count: int, spacing: float, now: datetime) -> datetime:
    """The first slot of `count` pages that wait for the host: after its booked slots and after
    the pages already waiting for it."""
    if spacing == 0.0:  # held back by a Retry-After, or waiting for the host's robots.txt
        return max(next_free, now + timedelta(seconds=UNKNOWN_DELAY_SECONDS))
    first = max(next_free, row.slotted_until or next_free)
    row.slotted_until = first + timedelta(seconds=count * spacing)
    return first


def _apply_bucket(project: Project, grants: dict[str, HostGrant]) -> None:
    """Take tokens for the granted requests; what the bucket cannot pay for waits for the refill."""
    row = Project.objects.select_for_update().get(id=project.id)
    now = timezone.now()
    elapsed = (now - row.bucket_updated_at).total_seconds() if row.bucket_updated_at else math.inf
    tokens = min(float(row.rate_burst), row.bucket_tokens + elapsed * row.rate_limit)
    for grant in sorted(grants.values(), key=lambda g: g.host):
        paid = min(grant.granted, int(tokens))
        tokens -= paid
        if paid < grant.granted:
            refill = now + timedelta(seconds=(grant.granted - paid) / row.rate_limit)
            grant.granted, grant.later = paid, max(grant.later or refill, refill)
    Project.objects.filter(id=row.id).update(bucket_tokens=tokens, bucket_updated_at=now)


HOLD_AFTER_FAILURES = 3  # pages of a host failing this many times in a row hold the host back
# Holds a host gets in a row (the retry base doubled each time: about half an hour at the shipped
# 30 s); after that its pages take their own retries, and a new page fails as any page does.
HOLD_PATIENCE = 6


def hosts_note_failures(*, robots_unreadable: set[str], unreachable: set[str]) -> dict:
    """Record how each host of a round did. A host whose robots.txt cannot be read (5xx, no answer)
    is held back at once: every page of it would be refused. One that did not answer a request
    HOLD_AFTER_FAILURES rounds in a row is held back too. The hold starts at the retry schedule's
    base (CRAWL_RETRY_BASE_SECONDS) and doubles with each failure in a row, up to an hour, for at
    most HOLD_PATIENCE failures in a row; an answer resets the count (hosts_answered). Its pages
    wait for the hold instead of being claimed in vain. A held host is down: one request probes it
    every CRAWL_HOST_PROBE_SECONDS (a failed probe moves only the next one), until it answers.
    Returns {host: held until}."""
    held = {}
    for host in sorted(robots_unreadable | unreachable):
        with transaction.atomic():
            row, _ = Host.objects.select_for_update().get_or_create(host=host)
            now = timezone.now()
            if is_probing(row, now):
                row.probe_at, held[host] = next_probe(now), row.backoff_until
                row.save(update_fields=["probe_at", "updated_at"])
                continue
            row.failures += 1
            if row.failures <= HOLD_PATIENCE and (host in robots_unreadable or row.failures >= HOLD_AFTER_FAILURES):
                base = settings.CRAWL_RETRY_BASE_SECONDS
                until = now + timedelta(seconds=min(MAX_BACKOFF_SECONDS, base * 2 ** min(row.failures - 1, 12)))
                row.backoff_until = held[host] = max(until, row.backoff_until or until)
                row.down_since = row.down_since or now
                row.slow_reason = "robots.txt unreadable" if host in robots_unreadable else "no answer"
            if row.down_since is not None:
                row.probe_at = next_probe(now)
            row.save(update_fields=["failures", "backoff_until", "down_since", "probe_at", "slow_reason", "updated_at"])
    return held


THROTTLE_DECAY = 0.8


def hosts_answered(*, reachable: set[str], unthrottled: set[str]) -> None:
    """Hosts that answered, in one statement: the `reachable` ones' failures in a row
    (hosts_note_failures) go back to 0, the `unthrottled` ones' adaptive delay (hosts_throttle)
    fades, and is back at the floor after CRAWL_THROTTLE_FORGIVE_SECONDS without an incident.
    Only rows with something to reset are written. A reachable host that was down is back: its
    hold ends and its waiting pages are due now (pages_host_back)."""
    if not reachable and not unthrottled:
        return
    now = timezone.now()
    reachable_list, unthrottled_list = sorted(reachable), sorted(unthrottled)
    fading = Q(host__in=unthrottled_list, throttle_delay__gt=0)
    quiet = Q(throttle_delay__lt=THROTTLE_START_SECONDS / 4) | Q(throttled_at__lte=forgiven_before(now))
    failing = Q(host__in=reachable_list) & (Q(failures__gt=0) | Q(down_since__isnull=False))
    touched = Host.objects.filter(failing | fading).update(
        failures=Case(
            When(host__in=reachable_list, then=Value(0)), default=F("failures"), output_field=PositiveIntegerField()
        ),
        throttle_delay=Case(
            When(fading & quiet, then=Value(0.0)),
            When(fading, then=F("throttle_delay") * THROTTLE_DECAY),
            default=F("throttle_delay"),
            output_field=FloatField(),
        ),
    )
    if not touched:  # the usual round: no host of it was failing, down or slowed, so none is back
        return
    back = list(Host.objects.filter(host__in=reachable_list, down_since__isnull=False).values_list("host", flat=True))
    if back:
        _hosts_back(back, now)


def _hosts_back(hosts: list[str], now: datetime) -> None:
    """Down hosts that answered: not held any more, and their waiting pages are due now."""
    Host.objects.filter(host__in=hosts, down_since__isnull=False).update(
        down_since=None, probe_at=None, backoff_until=None, recovered_at=now, slow_reason="", updated_at=now
    )
    pages_host_back(hosts=hosts)


def hosts_throttle(*, slowed: set[str], reasons: dict[str, str] | None = None) -> dict[str, datetime]:
    """AutoThrottle's idea for hosts that say "too many requests" without saying how long to wait:
    each incident doubles the host's adaptive delay and holds the host that long, with jitter (one
    doubling per incident window: crawl/hosts/backoff.py); each round it answers normally, the
    delay shrinks back (hosts_answered), never below the configured one (it is added on top), and
    after a quiet period it is gone. `reasons`: {host: what happened}, shown on the dashboard.
    Returns {host: held until}."""
    held = {}
    for host in sorted(slowed):
        with transaction.atomic():
            row, _ = Host.objects.select_for_update().get_or_create(host=host)
            reason = (reasons or {}).get(host, "HTTP 429/503 without Retry-After")
            throttle_incident(row, timezone.now(), reason=reason)
            row.save(update_fields=[*THROTTLE_FIELDS, "updated_at"])
            held[host] = row.backoff_until
    return held


def host_back_off(*, host: str, seconds: float, status: int) -> datetime:
    """A 429/503 with Retry-After: no worker sends to this host before the returned time."""
    until = timezone.now() + timedelta(seconds=min(MAX_BACKOFF_SECONDS, seconds))
    with transaction.atomic():
        row, _ = Host.objects.select_for_update().get_or_create(host=host)
        row.backoff_until = max(until, row.backoff_until or until)
        row.last_status, row.slow_reason = status, f"HTTP {status} with Retry-After"
        row.save(update_fields=["backoff_until", "last_status", "slow_reason", "updated_at"])
    return row.backoff_until
