"""The download stage and asset bookkeeping: link assets to pages, claim, download, store, finish."""

import logging
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.canonical import server_of, url_key
from core.net.client import SLOT_MISSED
from core.storage import StorageUnavailable, store_file
from core.tempfiles import clean_stale_temp
from crawl.frontier.assets import assets_finish, assets_insert, assets_wake_when_due
from crawl.frontier.stages import DOWNLOAD
from crawl.frontier.verdicts import Done, Fail, Postpone, Retry, Verdict, retry_or_fail
from crawl.frontier.wakeups import wakeup_taken
from crawl.hosts.answers import HostAnswer, hosts_record_answers
from crawl.hosts.claims import IDLE_RETRY_SECONDS
from crawl.hosts.politeness import hosts_release
from crawl.results import assets_stored
from crawlproject.queues import STAGES
from media.claims import assets_claim_round
from media.downloaders.plain_http import Download
from media.transfers import Fetched, download_assets

from .models import MediaAsset, PageAsset

log = logging.getLogger("crawlhub.media")


def assets_download(*, asset_ids: list[int], worker: str = "", wake: str | None = None) -> list[int]:
    """Download the claimable assets among asset_ids, or, `asset_ids` empty (a wake-up booked for
    `wake`, an ISO time), the assets ready now across projects and hosts, each at its host's slot
    (media/claims.py), into storage; return the ids finished. The stage's next wake-up is booked
    for when its next asset is due.

    Bytes go to a temp file, then to storage under their sha256, and only then is the row marked
    done (by CAS on the lease), so there is never a row without its object or a partial object.
    """
    if wake:
        wakeup_taken(DOWNLOAD, datetime.fromisoformat(wake))
    claim = assets_claim_round(asset_ids, limit=STAGES[DOWNLOAD].batch(), worker=worker)
    if not claim.assets:
        hosts_release(claim.token)
        assets_wake_when_due(least=IDLE_RETRY_SECONDS)
        return []
    clean_stale_temp(older_than=settings.CRAWL_LEASE_SECONDS)
    fetched = []
    try:
        try:
            fetched = download_assets(claim.assets, claim.slots)
        finally:
            hosts_release(claim.token)
        hosts_record_answers(
            HostAnswer(server_of(f.url), f.status_code, f.retry_after) for i in fetched for f in i.files
        )
        finished = [f.asset.id for f in fetched if _finish(f, claim.token, worker)]
    finally:  # a write that failed (the database restarting) leaves no temp file behind
        for item in fetched:
            for result in item.files:
                result.discard()
    assets_wake_when_due(least=0.0)
    return finished


def _finish(fetched: Fetched, token, worker: str) -> bool:
    """Store the bytes, then hand the verdict to the frontier (CAS on the lease); temp files are
    always removed. True when the asset is finished (done or failed for good)."""
    asset = fetched.asset
    try:
        verdict = _outcome(asset, fetched.files)
    except StorageUnavailable as exc:  # storage down: retry later, nothing partial was kept
        log.warning("storing asset %s failed: %r", asset.id, exc)
        verdict = Retry("storage_error", repr(exc))
    except Exception as exc:
        log.exception("storing asset %s failed", asset.id)
        verdict = Fail("store_failed", repr(exc))
    finally:
        for result in fetched.files:
            result.discard()
    verdict.fields["downloaded_by"] = worker
    with transaction.atomic():  # a stored asset is offered to the project's sinks with its verdict
        written = assets_finish(token=token, verdicts=[(asset, verdict)])
        if asset.id in written and isinstance(verdict, Done):
            for name, value in verdict.fields.items():
                setattr(asset, name, value)
            assets_stored.send(sender=asset.project_id, assets=[asset])
    if asset.id not in written:
        return False
    return isinstance(verdict, Done | Fail) or asset.attempts >= settings.CRAWL_MAX_ATTEMPTS


def _outcome(asset: MediaAsset, files: list[Download]) -> Verdict:
    if files and files[0].error_code == SLOT_MISSED:  # not sent: it waits for its host's next slot
        return Postpone(SLOT_MISSED, files[0].error_message, timezone.now())
    if asset.downloader == "gallerydl":
        return _gallery_outcome(asset, files)
    result = files[0]
    if result.error_code:
        return retry_or_fail(result.error_code, result.error_message, {"status_code": result.status_code})
    return Done({"status_code": result.status_code} | _stored(result))


def _stored(result: Download) -> dict:
    key = store_file(result.path, sha256=result.sha256, size=result.size)
    return {
        "sha256": result.sha256,
        "size": result.size,
        "mime": result.mime[:200],
        "storage_key": key,
        "metadata": result.metadata,
        "downloaded_at": timezone.now(),
    }


def _gallery_outcome(asset: MediaAsset, files: list[Download]) -> Verdict:
    """A gallery becomes one done asset per file (url `<gallery>#<n>`), linked to the gallery's pages."""
    good = [f for f in files if not f.error_code]
    if not good:
        first = files[0] if files else Download(url=asset.url, error_code="empty_gallery", error_message="no files")
        return retry_or_fail(first.error_code, first.error_message)
    items = []
    for n, result in enumerate(good):
        item_url = f"{asset.url}#{n}"
        row = MediaAsset(
            project_id=asset.project_id,
            url=item_url,
            url_key=url_key(item_url),
            kind="image",
            downloader="gallerydl",
            **_stored(result),
        )
        items += assets_insert([row], done=True)
    page_ids = PageAsset.objects.filter(asset=asset).values_list("page_id", flat=True)
    PageAsset.objects.bulk_create(
        [PageAsset(page_id=p, asset_id=a) for p in page_ids for a in items], ignore_conflicts=True
    )
    skipped = len(files) - len(good)
    return Done({"metadata": {"items": len(good), "skipped": skipped}, "downloaded_at": timezone.now()})
