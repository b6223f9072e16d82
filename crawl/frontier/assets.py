"""Transitions of media asset rows: insert, claim, finish by verdict, retry; and the pages that
waited for them."""

import uuid

from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from crawl.db import chunked, insert_new
from crawl.models import Page

from . import stages
from .leases import lease_claim, lease_finish, lease_holder
from .pages import failures_log, pages_complete
from .verdicts import Done, Fail, Retry, Verdict, error_columns, retry_at
from .wakeups import waiting_until, wakeups_group

CHUNK = 500


def _assets():
    from media.models import MediaAsset  # the media app sits above crawl: no import at load time

    return MediaAsset


def assets_insert(rows: list, *, done: bool = False) -> list[int]:
    """Insert new asset rows (in key order) queued for download, published after the commit; or,
    `done`, rows already stored (the files of a gallery). Returns the ids of the rows inserted."""
    model, now = _assets(), timezone.now()
    for row in rows:
        row.state = model.State.DONE if done else model.State.QUEUED
        row.enqueued_at, row.next_fetch_at = (None if done else now), now
    new_ids = insert_new(model, rows, conflict_fields=("project", "url_key"))
    if not done:
        stages.after_commit(stages.publish_download, new_ids)
    return new_ids


def assets_claim(asset_ids: list[int], *, worker: str = "") -> tuple[uuid.UUID, list]:
    """Lease the due queued assets among asset_ids in the name of `worker` (an expired lease goes
    back through the reaper)."""
    model, now = _assets(), timezone.now()
    claimable = Q(state=model.State.QUEUED, next_fetch_at__lte=now)
    holder = {"downloaded_by": lease_holder(worker)} if worker else {}
    return lease_claim(model, asset_ids, claimable=claimable, state=model.State.LEASED, **holder)


def assets_finish(*, token: uuid.UUID, verdicts: list[tuple[object, Verdict]]) -> set[int]:
    """Write each asset's verdict while `token` still holds it; retries are woken when due, and the
    pages that waited only for these assets are done. Returns the ids written."""
    model, now = _assets(), timezone.now()
    changes = {asset.id: _columns(model, asset, verdict, now) for asset, verdict in verdicts}
    written = lease_finish(model, token=token, from_state=model.State.LEASED, changes=changes)
    waiting = [(i, c["next_fetch_at"]) for i, c in changes.items() if i in written and c.get("enqueued_at")]
    for countdown, ids in wakeups_group(waiting, now).items():
        stages.after_commit(stages.publish_download, ids, countdown=countdown)
    finished = [i for i in written if changes[i]["state"] in (model.State.DONE, model.State.FAILED)]
    failed = [(a.url, changes[a.id]) for a, _ in verdicts if a.id in written and changes[a.id]["state"] == "failed"]
    failures_log(failed, stage=stages.DOWNLOAD)
    pages_waiting_complete(asset_ids=finished)
    return written


def _columns(model, asset, verdict: Verdict, now) -> dict:
    if isinstance(verdict, Done):
        return verdict.fields | {"state": model.State.DONE, "error_code": "", "error_message": ""}
    error = error_columns(verdict)
    if isinstance(verdict, Retry):
        due = retry_at(asset.attempts, now)
        if due is not None:
            return verdict.fields | error | waiting_until(due, now) | {"state": model.State.QUEUED}
    if isinstance(verdict, Retry | Fail):
        return verdict.fields | error | {"state": model.State.FAILED}
    raise TypeError(f"not an asset verdict: {verdict!r}")


def assets_retry(assets) -> int:
    """Queue the failed assets of the queryset again, now, with fresh attempts. Returns assets queued."""
    model, now = _assets(), timezone.now()
    ids = list(assets.filter(state=model.State.FAILED).values_list("id", flat=True))
    for chunk in chunked(ids, CHUNK):
        model.objects.filter(id__in=chunk, state=model.State.FAILED).update(
            state=model.State.QUEUED,
            attempts=0,
            error_code="",
            error_message="",
            next_fetch_at=now,
            lease_token=None,
            lease_expires_at=None,
            enqueued_at=now,
        )
        stages.after_commit(stages.publish_download, chunk)
    return len(ids)


def assets_publish_owed(assets) -> int:
    """Publish the due queued assets of the queryset (start, resume). Returns assets published."""
    model, now = _assets(), timezone.now()
    ids = list(assets.filter(state=model.State.QUEUED, next_fetch_at__lte=now).values_list("id", flat=True))
    for chunk in chunked(ids, CHUNK):
        model.objects.filter(id__in=chunk, state=model.State.QUEUED).update(enqueued_at=now)
        stages.after_commit(stages.publish_download, chunk)
    return len(ids)


def pages_waiting_complete(*, asset_ids: list[int] | None = None, project_id: int | None = None) -> int:
    """Mark `extracted` pages done once none of their assets is pending (the page's last stage)."""
    from media.models import PageAsset

    pending = PageAsset.objects.filter(page=OuterRef("pk"), asset__state__in=stages.ASSET_PENDING_STATES)
    pages = Page.objects.exclude(Exists(pending))
    if asset_ids is not None:
        if not asset_ids:
            return 0
        pages = pages.filter(id__in=PageAsset.objects.filter(asset_id__in=asset_ids).values("page_id"))
    if project_id is not None:
        pages = pages.filter(project_id=project_id)
    return pages_complete(pages)
