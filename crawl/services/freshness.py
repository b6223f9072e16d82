"""Recrawl and freshness: adaptive revisit intervals and change detection with page history (the
dispatcher that hands due pages back to the fetch stage is crawl/frontier/recrawl.py).

Revisit times live in the database (`next_fetch_at` of done pages), never in Celery countdowns or
ETAs. A change is a new normalised-text hash (scrape/fingerprint.py), so a changed timestamp or
counter is not one; a 304 or an identical body is no change either.
"""

from django.utils import timezone

from core.batchsql import commit_order_lock
from crawl.frontier.recrawl import HUB_KINDS
from crawl.models import Page, PageVersion, Project


def is_hub(page: Page) -> bool:
    """Start pages, sitemaps and feeds: where new pages appear, so they are revisited most often."""
    return page.is_seed or page.kind in HUB_KINDS


def revisit(project: Project, page: Page, *, changed: bool) -> int:
    """Seconds to the page's next revisit: hubs on their fixed short interval; other pages halve their interval
    when they changed and double it when not, within the project's bounds. A spider's request with an
    `age` is never revisited sooner than that (pyspider's age)."""
    if is_hub(page):
        seconds = project.hub_revisit_seconds
    else:
        current = page.revisit_seconds or project.revisit_min_seconds
        seconds = current // 2 if changed else current * 2
        seconds = max(project.revisit_min_seconds, min(project.revisit_max_seconds, seconds))
    age = (page.request or {}).get("age") if isinstance(page.request, dict) else None
    return max(seconds, int(age)) if age else seconds


def versions_record(changed: list[tuple[Page, dict, str]]) -> None:
    """A version row per page whose normalised text changed: (page, its new row values, its text).
    Inside the caller's transaction, with the versions' commit-order lock: the change feed reads by
    id (console/api/changes.py), and must never see an id appear below one it already served."""
    if not changed:
        return
    commit_order_lock("crawl.PageVersion")
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
                job_id=page.job_id,
            )
            for page, values, text in changed
        ]
    )
