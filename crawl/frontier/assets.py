"""Transitions of media asset rows: link to the pages that reference them, insert, claim, finish by
verdict, retry; and the pages that waited for them."""

import uuid
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from core.batchsql import chunked, insert_new
from core.canonical import InvalidURL, canonicalize, host_in_domains, host_of, url_key
from crawl.models import MediaAsset, Page, PageAsset, Project
from crawl.policy import project_media_rules, project_scope

from . import stages
from .fair import fair_rows, project_weights
from .leases import lease_claim, lease_finish, lease_holder
from .pages import failures_log, pages_complete
from .verdicts import Done, Fail, Postpone, Retry, Verdict, error_columns, retry_at
from .wakeups import waiting_until, wakeups_group

CHUNK = 500


def assets_link_many(*, project: Project, refs_by_page: dict[int, list[tuple[str, str]]]) -> set[int]:
    """Record pages' media: one asset row per URL (new ones are queued for download), one link
    row per page and asset. Returns the ids of pages with an asset still pending.
    Inserts go in key order so concurrent batches take index locks in the same order.
    """
    assets, keys_by_page = _wanted_assets(project, refs_by_page)
    if not assets:
        return set()
    assets_insert([assets[k] for k in sorted(assets)])
    rows = MediaAsset.objects.filter(project=project, url_key__in=assets.keys()).values_list("url_key", "id", "state")
    known = {key: (asset_id, state) for key, asset_id, state in rows}
    links = sorted((pid, known[k][0]) for pid, keys in keys_by_page.items() for k in keys)
    PageAsset.objects.bulk_create([PageAsset(page_id=p, asset_id=a) for p, a in links], ignore_conflicts=True)
    return {pid for pid, keys in keys_by_page.items() if any(known[k][1] in stages.ASSET_PENDING_STATES for k in keys)}


def _wanted_assets(project, refs_by_page) -> tuple[dict[str, MediaAsset], dict[int, set[str]]]:
    rules, domains = project_media_rules(project), project_scope(project).domains
    assets: dict[str, MediaAsset] = {}
    keys_by_page: dict[int, set[str]] = {}
    for page_id, refs in refs_by_page.items():
        for raw, kind in refs:
            try:
                canonical = canonicalize(raw)
            except InvalidURL:
                continue
            explicit = kind == "download"  # an ID scraper's job: the project's own rule asked for it
            offsite = domains and not host_in_domains(host_of(canonical), domains)
            if not explicit and ((offsite and not rules.any_host) or not rules.wants(canonical, kind)):
                continue
            kind = "file" if explicit else kind
            key = url_key(canonical)
            downloader = rules.downloader_for(canonical)
            assets.setdefault(
                key,
                MediaAsset(project=project, url=canonical, url_key=key, kind=kind, downloader=downloader),
            )
            keys_by_page.setdefault(page_id, set()).add(key)
    return assets, keys_by_page


def assets_insert(rows: list, *, done: bool = False) -> list[int]:
    """Insert new asset rows (in key order) queued for download, published after the commit; or,
    `done`, rows already stored (the files of a gallery). Returns the ids of the rows inserted."""
    model, now = MediaAsset, timezone.now()
    for row in rows:
        row.state = model.State.DONE if done else model.State.QUEUED
        row.enqueued_at, row.next_fetch_at = (None if done else now), now
    new_ids = insert_new(model, rows, conflict_fields=("project", "url_key"))
    if not done:
        stages.after_commit(stages.publish_download, new_ids)
    return new_ids


def assets_ready(*, limit: int) -> list[tuple[int, int, str]]:
    """(id, project_id, url) of up to `limit` queued assets due now, of active projects (a paused or
    stopped one's wait for Start or Resume), fair between projects (a
    share by weight each, earliest due first, interleaved). Rows another claim holds locked are skipped
    (PostgreSQL), so claims running at once take different assets; the caller's transaction holds
    the locks until it leases them. Each share is one probe of the asset_ready index."""
    return fair_rows(project_weights(status=Project.Status.ACTIVE), limit, _due_rows)


def _due_rows(project_id: int, offset: int, count: int) -> list[tuple[int, int, str]]:
    model = MediaAsset
    rows = model.objects.select_for_update(skip_locked=True, of=("self",)).filter(
        project_id=project_id, state=model.State.QUEUED, suspect=False, next_fetch_at__lte=timezone.now()
    )
    return list(rows.order_by("next_fetch_at").values_list("id", "project_id", "url")[offset : offset + count])


def assets_next_due() -> datetime | None:
    """When the earliest queued asset of an active project is due (None: none waits): one index
    probe per project."""
    model, first = MediaAsset, None
    for project_id in project_weights(status=Project.Status.ACTIVE):
        waiting = model.objects.filter(project_id=project_id, state=model.State.QUEUED, suspect=False)
        due = waiting.order_by("next_fetch_at").values_list("next_fetch_at", flat=True).first()
        first = due if first is None or (due is not None and due < first) else first
    return first


def assets_wake_when_due(*, least: float) -> None:
    """Book the download stage's next wake-up for when its earliest queued asset is due, and at
    least `least` seconds from now."""
    due = assets_next_due()
    if due is not None:
        seconds = (due - timezone.now()).total_seconds()
        stages.wake_stage(stages.DOWNLOAD, countdown=max(seconds, least))


def assets_wait(starts: dict[int, datetime]) -> int:
    """Queued assets whose host cannot take them now wait for the start time each was given (their
    host's next free slots): no claim looks at them before then. A wait too long for a wake-up
    message has no `enqueued_at`: the reaper hands it out once due. Returns rows changed."""
    model, now = MediaAsset, timezone.now()
    rows = [model(id=i, **waiting_until(at, now)) for i, at in starts.items()]
    return model.objects.bulk_update(rows, ["next_fetch_at", "enqueued_at"])


def assets_send_alone(waits: dict[int, float]) -> None:
    """The reaper's assets (each claimed alone, by id) that a claim could not start now: each is
    sent again, alone, for when its host can take it (`waits`: seconds from now); a wait longer
    than a wake-up message may be delayed is left to the reaper."""
    for asset_id, seconds in waits.items():
        if seconds <= settings.CRAWL_WAKEUP_MAX_SECONDS:
            stages.after_commit(stages.publish_download, [asset_id], countdown=seconds, batch=1)


def assets_wake_more() -> None:
    """A claim took a full batch: more may be ready, for another worker process (after the commit)."""
    transaction.on_commit(lambda: stages.wake_stage(stages.DOWNLOAD))


def assets_claim(asset_ids: list[int], *, worker: str = "", token: uuid.UUID | None = None) -> tuple[uuid.UUID, list]:
    """Lease the due queued assets among asset_ids in the name of `worker`, under `token` when given
    (the host capacity booked for them is held under it); an expired lease goes back through the
    reaper. Only an active project's: a paused or stopped one's wait."""
    model, now = MediaAsset, timezone.now()
    active = list(project_weights(status=Project.Status.ACTIVE))
    claimable = Q(state=model.State.QUEUED, next_fetch_at__lte=now, project_id__in=active)
    holder = {"downloaded_by": lease_holder(worker)} if worker else {}
    return lease_claim(model, asset_ids, claimable=claimable, token=token, state=model.State.LEASED, **holder)


def assets_finish(*, token: uuid.UUID, verdicts: list[tuple[object, Verdict]]) -> set[int]:
    """Write each asset's verdict while `token` still holds it; retries are woken when due, and the
    pages that waited only for these assets are done. Returns the ids written."""
    model, now = MediaAsset, timezone.now()
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
    cleared = {"suspect": False} if asset.suspect else {}  # it came back without killing its worker
    if isinstance(verdict, Done):
        return verdict.fields | cleared | {"state": model.State.DONE, "error_code": "", "error_message": ""}
    return cleared | _error_columns(model, asset, verdict, now)


def _error_columns(model, asset, verdict: Verdict, now) -> dict:
    error = error_columns(verdict)
    if isinstance(verdict, Postpone):  # its host's slot passed, or its host holds back: no attempt spent
        wait = waiting_until(verdict.until, now)
        return verdict.fields | error | wait | {"state": model.State.QUEUED, "attempts": F("attempts") - 1}
    if isinstance(verdict, Retry):
        due = retry_at(asset.attempts, now)
        if due is not None:
            return verdict.fields | error | waiting_until(due, now) | {"state": model.State.QUEUED}
    if isinstance(verdict, Retry | Fail):
        return verdict.fields | error | {"state": model.State.FAILED}
    raise TypeError(f"not an asset verdict: {verdict!r}")


def assets_retry(assets) -> int:
    """Queue the failed assets of the queryset again, now, with fresh attempts. Returns assets queued."""
    model, now = MediaAsset, timezone.now()
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
            suspect=False,
        )
        stages.after_commit(stages.publish_download, chunk)
    return len(ids)


def assets_publish_owed(assets) -> int:
    """Publish the due queued assets of the queryset (start, resume): a wake-up for them all, the
    reaper's suspects one by one. Returns assets published."""
    model, now = MediaAsset, timezone.now()
    rows = list(assets.filter(state=model.State.QUEUED, next_fetch_at__lte=now).values_list("id", "suspect"))
    for chunk in chunked(rows, CHUNK):
        model.objects.filter(id__in=[r[0] for r in chunk], state=model.State.QUEUED).update(enqueued_at=now)
        stages.after_commit(stages.publish_download, [r[0] for r in chunk if not r[1]])
        stages.after_commit(stages.publish_download, [r[0] for r in chunk if r[1]], batch=1)
    return len(rows)


def pages_waiting_complete(*, asset_ids: list[int] | None = None, project_id: int | None = None) -> int:
    """Mark `extracted` pages done once none of their assets is pending (the page's last stage)."""
    from crawl.models import PageAsset

    pending = PageAsset.objects.filter(page=OuterRef("pk"), asset__state__in=stages.ASSET_PENDING_STATES)
    pages = Page.objects.exclude(Exists(pending))
    if asset_ids is not None:
        if not asset_ids:
            return 0
        pages = pages.filter(id__in=PageAsset.objects.filter(asset_id__in=asset_ids).values("page_id"))
    if project_id is not None:
        pages = pages.filter(project_id=project_id)
    return pages_complete(pages)
