"""The sweeper: recovers lost work only. Expired leases go back to their stage (or fail once their
attempts are spent), a stage with ready work is woken up, and the rows the reaper sends one by one
whose message was lost are sent again.

Celery on Redis can lose a message (a killed worker's prefetch, a restarted broker) and a worker
can die between commit and publish. The rows say what is owed, so this re-derives the messages
from the database. Work that merely waits is not its business (wakeups.py), except waits longer
than a wake-up message may be delayed. Every query here is served by an index on (state, ...).
"""

from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db.models import F, Q
from django.db.models.functions import Greatest
from django.dispatch import Signal
from django.utils import timezone

from core.tempfiles import clean_stale_temp
from crawl.models import HostLease, MediaAsset, Page, Project

from . import stages
from .assets import assets_next_due, pages_waiting_complete
from .leases import lease_expired, lease_release
from .pages import pages_next_due
from .probes import pages_probe_down_hosts
from .upkeep import tables_upkeep

# Sent by the reaper: receivers answer with {worker name: since} for workers whose heartbeats
# stopped (since: now) or that started again under the same name (since: that start), so the
# leases claimed in their name before then go back now, not when they expire. It is sent with
# `holders`, the names live leases were claimed in ("worker#pid"), and answers for those too: a pool
# process its worker no longer has is gone since the heartbeat that found it missing. The console
# keeps the heartbeats.
workers_stopped = Signal()

REPUBLISH_LIMIT = 5000
SUSPECT_BATCH = 1  # rows whose worker died holding them are retried one per message: a poison row fails alone


@dataclass
class ReapReport:
    leases_expired: int = 0
    leases_abandoned: int = 0  # held by workers whose heartbeats stopped: expired now
    leases_failed: int = 0
    fetch_republished: int = 0
    extract_republished: int = 0
    download_republished: int = 0
    pages_completed: int = 0
    probes: int = 0  # pages made due to probe their down hosts
    temp_files_removed: int = 0
    upkeep: list[str] = field(default_factory=list)


def reap(*, project_id: int | None = None) -> ReapReport:
    """One sweep; safe to run from any number of places at once."""
    report = ReapReport()
    scope = {} if project_id is None else {"project_id": project_id}
    pages, assets = Page.objects.filter(**scope), MediaAsset.objects.filter(**scope)
    report.leases_abandoned = _expire_abandoned(pages, assets)
    for counts in (_expire_fetch_leases(pages), _expire_extract_leases(pages), _expire_asset_leases(assets)):
        report.leases_failed += counts[0]
        report.leases_expired += counts[1]
    report.probes = pages_probe_down_hosts()
    report.fetch_republished = _republish_fetch(pages)
    report.extract_republished = _republish_extract(pages)
    report.download_republished = _republish_download(assets)
    report.pages_completed = pages_waiting_complete(project_id=project_id)
    report.temp_files_removed = clean_stale_temp(older_than=settings.CRAWL_LEASE_SECONDS)
    report.upkeep = tables_upkeep()
    return report


def _expire_abandoned(pages, assets) -> int:
    """Leases claimed by workers that are gone, or by pool processes of a live worker that are gone,
    expire now (the sweep below hands them back): a killed process's work waits a few heartbeats,
    not a lease. A claim records its holder as "worker#pid" (leases.lease_holder)."""
    now = timezone.now()
    live = Q(lease_expires_at__gt=now)
    held = {
        "fetched_by": pages.filter(live, state=Page.State.LEASED),
        "extracted_by": pages.filter(live, state=Page.State.FETCHED),
        "downloaded_by": assets.filter(live, state="leased"),
    }
    holders = set()
    for column, rows in held.items():
        holders |= set(rows.exclude(**{column: ""}).values_list(column, flat=True).distinct())
    if not holders:
        return 0
    gone: dict[str, object] = {}
    for _, answer in workers_stopped.send(sender=reap, holders=holders):
        gone |= answer or {}
    count, past = 0, now - timedelta(seconds=1)
    for holder, since in sorted(gone.items()):
        if holder not in holders:
            continue
        # Claimed before `since`: a lease ends CRAWL_LEASE_SECONDS after its claim.
        before = Q(lease_expires_at__lt=since + timedelta(seconds=settings.CRAWL_LEASE_SECONDS))
        for column, rows in held.items():
            abandoned = rows.filter(before, **{column: holder})
            tokens = set(abandoned.values_list("lease_token", flat=True))
            count += abandoned.update(lease_expires_at=past)
            # The hosts' in-flight capacity those claims booked (the same token) is free again.
            HostLease.objects.filter(token__in=tokens).update(expires_at=past)
    return count


def _expire(qs, *, fail_columns: dict, back_columns: dict, publish) -> tuple[int, int]:
    """Expired leases of qs come back one per message. A worker that died holding a whole batch
    says nothing about which row killed it, so those rows get their attempt back; a row that dies
    alone is charged, and fails once its attempts are spent. Returns (failed, handed back)."""
    now = timezone.now()
    rows = list(qs.filter(lease_expired(now)).values_list("id", "lease_token")[:REPUBLISH_LIMIT])
    held = Counter(token for _, token in rows)
    shared = [i for i, token in rows if held[token] > 1]
    alone = [i for i, token in rows if held[token] == 1]
    message = "the worker holding it stopped before finishing it, too many times (killed, or over its time limit)"
    spent = qs.filter(lease_expired(now), id__in=alone, attempts__gte=settings.CRAWL_MAX_ATTEMPTS)
    failed = lease_release(spent, error_code="lease_expired", error_message=message, **fail_columns)
    back_ids = shared + alone
    back = lease_release(
        qs.filter(lease_expired(now), id__in=shared),
        attempts=Greatest(F("attempts") - 1, 0),
        enqueued_at=now,
        **back_columns,
    )
    back += lease_release(qs.filter(lease_expired(now), id__in=alone), enqueued_at=now, **back_columns)
    stages.after_commit(publish, back_ids, batch=SUSPECT_BATCH)
    return failed, back


def _expire_fetch_leases(pages) -> tuple[int, int]:
    return _expire(
        pages.filter(state=Page.State.LEASED),
        fail_columns={"state": Page.State.FAILED},
        back_columns={"state": Page.State.QUEUED, "suspect": True},
        publish=lambda ids, batch: stages.publish_fetch(ids, batch=batch),
    )


def _expire_extract_leases(pages) -> tuple[int, int]:
    return _expire(
        pages.filter(state=Page.State.FETCHED),
        fail_columns={"state": Page.State.FAILED},
        back_columns={"suspect": True},
        publish=stages.publish_extract,
    )


def _expire_asset_leases(assets) -> tuple[int, int]:
    return _expire(
        assets.filter(state="leased"),
        fail_columns={"state": "failed"},
        back_columns={"state": "queued", "suspect": True},
        publish=stages.publish_download,
    )


def _lost(qs, now):
    """Rows no message carries: none was published (a long wait now due), or the last one is
    older than CRAWL_REPUBLISH_SECONDS past its due time (lost with a worker or the broker)."""
    stale = now - timedelta(seconds=settings.CRAWL_REPUBLISH_SECONDS)
    return qs.filter(Q(enqueued_at__isnull=True) | Q(enqueued_at__lt=stale))


def _republish_fetch(pages) -> int:
    """The fetch and render stages pull their work from the rows: when any is due, a wake-up is
    booked (a lost one is stale after seconds, so this sends a new one). The reaper's own pages
    (suspects, sent one per message) whose message was lost are sent again. Returns suspects sent."""
    for render in (False, True):
        due = pages_next_due(render=render)
        if due is not None and due <= timezone.now():
            stages.wake_stage(stages.RENDER if render else stages.FETCH)
    now = timezone.now()
    lost = _lost(pages.filter(state=Page.State.QUEUED, suspect=True), now).filter(next_fetch_at__lte=now)
    ids = list(lost.order_by("-priority", "id").values_list("id", flat=True)[:REPUBLISH_LIMIT])
    Page.objects.filter(id__in=ids).update(enqueued_at=now)
    stages.after_commit(stages.publish_fetch, ids, batch=SUSPECT_BATCH)
    return len(ids)


def _republish_extract(pages) -> int:
    """The extract stage pulls fetched pages nobody holds: when any waits, a wake-up is booked (a
    lost one is stale after seconds, so this sends a new one); a paused or stopped project's wait.
    Its suspects whose message was lost are sent again, one per message. Returns suspects sent."""
    unleased = pages.filter(state=Page.State.FETCHED, lease_token__isnull=True, project__status=Project.Status.ACTIVE)
    if unleased.filter(suspect=False).exists():
        stages.wake_stage(stages.EXTRACT)
    return _republish(unleased.filter(suspect=True), stages.publish_extract)


def _republish_download(assets) -> int:
    """The same for the download stage's queued assets, once one is due."""
    due = assets_next_due()
    if due is not None and due <= timezone.now():
        stages.wake_stage(stages.DOWNLOAD)
    return _republish(assets.filter(state="queued", suspect=True), stages.publish_download)


def _republish(qs, publish) -> int:
    now = timezone.now()
    lost = _lost(qs, now)
    if hasattr(qs.model, "next_fetch_at"):
        lost = lost.filter(next_fetch_at__lte=now)
    ids = list(lost.order_by("id").values_list("id", flat=True)[:REPUBLISH_LIMIT])
    qs.model.objects.filter(id__in=ids).update(enqueued_at=now)
    stages.after_commit(publish, ids, batch=SUSPECT_BATCH)
    return len(ids)
