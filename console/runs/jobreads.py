"""Reads of a job: its counts (live from its rows while it runs, kept in `stats` when it ends), its
span from its first fetch to its last finish, its state as its rows tell it, and its failures."""

from datetime import datetime, timedelta

from django.db.models import Count, Max, Min, Sum
from django.utils import timezone

from console.models import Job
from crawl.frontier.stages import PAGE_PENDING_STATES
from crawl.models import MediaAsset, Page
from scrape.models import Item


def job_observed(job: Job) -> tuple[str, datetime | None]:
    """The job's state and start as its rows tell them now: a queued job one of whose rows was
    claimed is running, since its first fetch, though the jobs tick (every few seconds) has not yet
    written so. Reads only."""
    if job.state == Job.State.QUEUED and job_claimed_any(job):
        return Job.State.RUNNING, job_span(job)[0] or job.created_at
    return job.state, job.started_at


def job_span(job: Job) -> tuple[datetime | None, datetime | None]:
    """When the job's work began and last finished, read from its rows (not from the tick that
    noticed): its first fetch began fetch_ms before that page's fetched_at, and its rows' latest
    write is the last finish. Rows written before the job was created are an earlier job's."""
    since, pages = job.created_at, Page.objects.filter(job_id=job.id, updated_at__gte=job.created_at)
    first = pages.filter(fetched_at__gte=since).order_by("fetched_at").values_list("fetched_at", "fetch_ms").first()
    began = first[0] - timedelta(milliseconds=first[1] or 0) if first else None
    assets = MediaAsset.objects.filter(job_id=job.id, updated_at__gte=since)
    spans = [rows.aggregate(first=Min("updated_at"), last=Max("updated_at")) for rows in (pages, assets)]
    firsts = [t for t in [began, *(span["first"] for span in spans)] if t is not None]
    lasts = [span["last"] for span in spans if span["last"] is not None]
    return (min(firsts) if firsts else None), (max(lasts) if lasts else None)


def job_has_failures(job: Job) -> bool:
    """Whether any of the job's pages or assets failed (an ended job's kept counts say it)."""
    if not job.active and job.stats:
        return bool(job.stats["pages_failed"] or job.stats["assets_failed"])
    failed = {"job_id": job.id, "state": "failed"}
    return Page.objects.filter(**failed).exists() or MediaAsset.objects.filter(**failed).exists()


def job_claimed_any(job: Job) -> bool:
    return Page.objects.filter(job_id=job.id).exists() or MediaAsset.objects.filter(job_id=job.id).exists()


def job_counts(job: Job, *, now=None) -> dict:
    """The job's counts from its rows: pages by state (and the done ones not parsed: not HTML),
    items, assets, bytes, errors by code, rate. An ended job's are the ones kept when it ended."""
    if not job.active and job.stats:
        return job.stats
    pages = Page.objects.filter(job_id=job.id)
    by_state = dict(pages.values_list("state").annotate(n=Count("id")))
    assets = MediaAsset.objects.filter(job_id=job.id)
    asset_states = dict(assets.values_list("state").annotate(n=Count("id")))
    page_bytes = pages.filter(state=Page.State.DONE).aggregate(b=Sum("content_length"))["b"] or 0
    asset_bytes = assets.filter(state=MediaAsset.State.DONE).aggregate(b=Sum("size"))["b"] or 0
    errors, asset_errors = _errors_by_code(pages), _errors_by_code(assets)  # two lists: not one mixed
    done, failed = by_state.get(Page.State.DONE, 0), by_state.get(Page.State.FAILED, 0)
    seconds = job_seconds(job, now=now)
    return {
        "pages": by_state,
        "pages_done": done,
        "pages_failed": failed,
        "pages_not_parsed": pages.filter(state=Page.State.DONE, parsed=False).count(),
        "pages_pending": sum(by_state.get(s, 0) for s in PAGE_PENDING_STATES),
        "items": Item.objects.filter(page__job_id=job.id).count(),
        "assets_done": asset_states.get(MediaAsset.State.DONE, 0),
        "assets_failed": asset_states.get(MediaAsset.State.FAILED, 0),
        "bytes": page_bytes + asset_bytes,
        "errors": errors,
        "asset_errors": asset_errors,
        "seconds": round(seconds, 2),
        "pages_per_second": round((done + failed) / seconds, 2) if seconds else 0.0,
    }


def job_seconds(job: Job, *, now=None) -> float:
    """How long the job ran: from its creation (a worker's start included: the wait is the user's
    too) to its last finish, or now, less the time it spent paused."""
    end = job.finished_at or now or timezone.now()
    paused = job.paused_seconds + (max((end - job.paused_at).total_seconds(), 0.0) if job.paused_at else 0.0)
    return max((end - job.created_at).total_seconds() - paused, 0.0)


def _errors_by_code(rows) -> dict[str, int]:
    failed = rows.filter(state="failed").values_list("error_code").annotate(n=Count("id")).order_by()
    return dict(sorted(((code or "error", n) for code, n in failed), key=lambda kv: -kv[1]))


def job_failures(job: Job, *, limit: int = 50) -> list[dict]:
    """The job's failed pages and assets, newest first: URL, error code and message."""
    rows = []
    for model, kind in ((Page, "page"), (MediaAsset, "asset")):
        failed = model.objects.filter(job_id=job.id, state="failed").order_by("-updated_at")
        for url, code, message, at in failed.values_list("url", "error_code", "error_message", "updated_at")[:limit]:
            rows.append({"kind": kind, "url": url, "code": code, "message": message, "at": at})
    return sorted(rows, key=lambda r: r["at"], reverse=True)[:limit]
