"""Recrawl and freshness: adaptive revisit intervals, change detection with page history, and the
dispatcher that hands due pages back to the fetch stage.

Revisit times live in the database (`next_fetch_at` of done pages), never in Celery countdowns or
ETAs. A change is a new normalised-text hash (scrape/fingerprint.py), so a changed timestamp or
counter is not one; a 304 or an identical body is no change either.
"""

import uuid
from datetime import timedelta

from django.db.models import Case, IntegerField, Q, Value, When
from django.utils import timezone

from crawl.models import Page, PageVersion, Project

HUB_KINDS = ("sitemap", "feed")
DISPATCH_LIMIT = 5000


def is_hub(page: Page) -> bool:
    """Start pages, sitemaps and feeds: where new pages appear, so they are revisited most often."""
    return page.is_seed or page.kind in HUB_KINDS


def revisit(project: Project, page: Page, *, changed: bool) -> dict:
    """The page's next revisit: hubs on their fixed short interval; other pages halve their interval
    when they changed and double it when not, within the project's bounds."""
    if is_hub(page):
        seconds = project.hub_revisit_seconds
    else:
        current = page.revisit_seconds or project.revisit_min_seconds
        seconds = current // 2 if changed else current * 2
        seconds = max(project.revisit_min_seconds, min(project.revisit_max_seconds, seconds))
    return {"revisit_seconds": seconds, "next_fetch_at": timezone.now() + timedelta(seconds=seconds)}


def unchanged(project: Project, page: Page) -> dict:
    """Row changes for a fetch that proved the page unchanged (304, or the same body)."""
    return {"state": Page.State.DONE, **revisit(project, page, changed=False)}


def versions_record(changed: list[tuple[Page, dict, str]]) -> None:
    """A version row per page whose normalised text changed: (page, its new row values, its text)."""
    PageVersion.objects.bulk_create(
        [
            PageVersion(
                page_id=page.id,
                fetched_at=page.fetched_at or timezone.now(),
                text=text[:200_000],
                content_sha256=page.content_sha256,
                text_hash=values["text_hash"],
                size=page.content_length,
                title=values.get("title", ""),
            )
            for page, values, text in changed
        ]
    )


def pages_dispatch(*, project_id: int | None = None, limit: int = DISPATCH_LIMIT) -> list[int]:
    """Queue the done pages whose revisit is due, hubs first, and return exactly the ids this call
    queued: the UPDATE is a compare-and-set stamped with a token, so two dispatchers running at
    once (two beats by mistake) never queue a page twice."""
    now, token = timezone.now(), uuid.uuid4()
    due = Page.objects.filter(state=Page.State.DONE, next_fetch_at__lte=now)
    if project_id is not None:
        due = due.filter(project_id=project_id, project__status=Project.Status.ACTIVE)
    hubs_first = Case(
        When(Q(is_seed=True) | Q(kind__in=HUB_KINDS), then=Value(0)), default=Value(1), output_field=IntegerField()
    )
    ids = list(due.order_by(hubs_first, "next_fetch_at").values_list("id", flat=True)[:limit])
    Page.objects.filter(id__in=ids, state=Page.State.DONE, next_fetch_at__lte=now).update(
        state=Page.State.QUEUED, attempts=0, enqueued_at=now, lease_token=token, lease_expires_at=None
    )
    _claim_waiting(project_id, now, token, limit)
    return list(Page.objects.filter(state=Page.State.QUEUED, lease_token=token).values_list("id", flat=True))


def _claim_waiting(project_id: int | None, now, token, limit: int) -> None:
    """Queued pages whose wait is over (politeness, back-off, retry) and that no message carries yet:
    the tick hands them out too, instead of leaving them to the reaper's slower sweep."""
    waiting = Page.objects.filter(state=Page.State.QUEUED, enqueued_at__isnull=True, next_fetch_at__lte=now)
    if project_id is not None:
        waiting = waiting.filter(project_id=project_id)
    ids = list(waiting.order_by("next_fetch_at").values_list("id", flat=True)[:limit])
    Page.objects.filter(id__in=ids, state=Page.State.QUEUED, enqueued_at__isnull=True).update(
        enqueued_at=now, lease_token=token
    )
