"""Thin Celery task of the extract stage (the frontier publishes what is owed next)."""

from celery import shared_task

from .services import pages_extract


@shared_task(name="scrape.extract_batch", bind=True, soft_time_limit=170, time_limit=180)
def extract_batch(self, page_ids: list[int], job: int | None = None) -> int:
    return pages_extract(page_ids=page_ids, worker=self.request.hostname or "")
