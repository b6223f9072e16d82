"""Thin Celery tasks of the crawl app: take ids, call one service, hand the next stage its ids."""

from celery import shared_task

from crawl import pipeline
from crawl.services.fetching import pages_fetch
from crawl.services.freshness import pages_dispatch
from crawl.services.reaper import reap


@shared_task(name="crawl.fetch_batch", bind=True, soft_time_limit=270, time_limit=300)
def fetch_batch(self, page_ids: list[int]) -> int:
    fetched = pages_fetch(page_ids=page_ids, worker=self.request.hostname or "")
    pipeline.publish_extract(fetched)
    return len(fetched)


@shared_task(name="crawl.render_batch", bind=True, soft_time_limit=570, time_limit=600)
def render_batch(self, page_ids: list[int]) -> int:
    fetched = pages_fetch(page_ids=page_ids, worker=self.request.hostname or "", render=True)
    pipeline.publish_extract(fetched)
    return len(fetched)


@shared_task(name="crawl.dispatch", soft_time_limit=50, time_limit=60)
def dispatch_task(project_id: int | None = None) -> int:
    """Beat's recrawl tick: queue the project's due pages (their revisit times are in the rows)."""
    queued = pages_dispatch(project_id=project_id)
    pipeline.publish_fetch(queued)
    return len(queued)


@shared_task(name="crawl.reap", soft_time_limit=50, time_limit=60)
def reap_task() -> dict:
    return vars(reap())
