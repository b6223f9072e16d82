"""The sweeper: gives expired leases back and republishes work that no message carries.

Celery on Redis can lose a message (a killed worker's prefetch, a restarted broker) and a worker
can die between commit and publish. The rows say what is owed, so this re-derives the messages
from the database. Duplicate messages are harmless: every claim is a compare-and-set.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from crawl import pipeline
from crawl.models import Page
from media.downloading import clean_stale_temp
from media.models import MediaAsset
from media.services import pages_complete

REPUBLISH_LIMIT = 5000


@dataclass
class ReapReport:
    leases_expired: int = 0
    leases_failed: int = 0
    fetch_republished: int = 0
    extract_republished: int = 0
    download_republished: int = 0
    pages_completed: int = 0
    temp_files_removed: int = 0


def reap(*, project_id: int | None = None) -> ReapReport:
    """One sweep; safe to run from any number of places at once."""
    report = ReapReport()
    pages = Page.objects.all() if project_id is None else Page.objects.filter(project_id=project_id)
    assets = MediaAsset.objects.all() if project_id is None else MediaAsset.objects.filter(project_id=project_id)
    report.leases_failed, report.leases_expired = _expire_leases(pages)
    _expire_asset_leases(assets)
    report.fetch_republished = _republish(pages.filter(state=Page.State.QUEUED), pipeline.publish_fetch, hosts=True)
    report.extract_republished = _republish(_unleased(pages.filter(state=Page.State.FETCHED)), pipeline.publish_extract)
    report.download_republished = _republish(assets.filter(state=MediaAsset.State.QUEUED), pipeline.publish_download)
    report.pages_completed = pages_complete(project_id=project_id)
    report.temp_files_removed = clean_stale_temp(older_than=settings.CRAWL_LEASE_SECONDS)
    return report


def _expire_leases(pages) -> tuple[int, int]:
    """Expired fetch leases go back to the queue, or fail once attempts are used up."""
    expired = pages.filter(state=Page.State.LEASED, lease_expires_at__lt=timezone.now())
    failed = expired.filter(attempts__gte=settings.CRAWL_MAX_ATTEMPTS).update(
        state=Page.State.FAILED,
        lease_token=None,
        lease_expires_at=None,
        error_code="lease_expired",
        error_message="the worker holding this page stopped before finishing it, too many times",
    )
    requeued = expired.update(state=Page.State.QUEUED, lease_token=None, lease_expires_at=None, enqueued_at=None)
    return failed, requeued


def _expire_asset_leases(assets) -> None:
    assets.filter(state=MediaAsset.State.LEASED, lease_expires_at__lt=timezone.now()).update(
        state=MediaAsset.State.QUEUED, lease_token=None, lease_expires_at=None, enqueued_at=None
    )


def _unleased(qs):
    return qs.filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=timezone.now()))


def _republish(qs, publish, *, hosts: bool = False) -> int:
    now = timezone.now()
    stale = Q(enqueued_at__isnull=True) | Q(enqueued_at__lt=now - timedelta(seconds=settings.CRAWL_REPUBLISH_SECONDS))
    due = qs.filter(stale, next_fetch_at__lte=now) if hasattr(qs.model, "next_fetch_at") else qs.filter(stale)
    rows = list(due.order_by("id").values_list("id", "host" if hosts else "id")[:REPUBLISH_LIMIT])
    if not rows:
        return 0
    ids = [r[0] for r in rows]
    qs.model.objects.filter(id__in=ids).update(enqueued_at=now)
    if hosts:
        publish(ids, dict(rows))
    else:
        publish(ids)
    return len(ids)
