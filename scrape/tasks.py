"""Thin Celery tasks of the extract stage (the frontier publishes what is owed next) and of the
result sinks."""

from celery import shared_task

from .services import pages_extract
from .sinks.delivery import sink_deliver, sinks_tick


@shared_task(name="scrape.extract_batch", bind=True, soft_time_limit=170, time_limit=180)
def extract_batch(self, page_ids: list[int], job: int | None = None, wake: str | None = None) -> int:
    """`page_ids` empty: a wake-up (booked for the time `wake`), which claims what is ready."""
    return pages_extract(page_ids=page_ids, worker=self.request.hostname or "", wake=wake)


@shared_task(name="scrape.deliver", soft_time_limit=110, time_limit=120)
def deliver_task(sink_id: int) -> int:
    """Deliver a sink's due records (scrape/sinks/delivery.py)."""
    return sink_deliver(sink_id)


@shared_task(name="scrape.sinks_tick", soft_time_limit=50, time_limit=60)
def sinks_tick_task() -> dict:
    return sinks_tick()
