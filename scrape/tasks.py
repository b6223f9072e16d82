"""Thin Celery tasks of the extract stage (the frontier publishes what is owed next)."""

from celery import shared_task

from crawlproject.queues import EXTRACT, STAGES

from .services import pages_extract


@shared_task(name=STAGES[EXTRACT].task, bind=True, **STAGES[EXTRACT].limits())
def extract_batch(self, page_ids: list[int], job: int | None = None, wake: str | None = None) -> int:
    """`page_ids` empty: a wake-up (booked for the time `wake`), which claims what is ready."""
    return pages_extract(page_ids=page_ids, worker=self.request.hostname or "", wake=wake)
