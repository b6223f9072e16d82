"""Thin Celery tasks of the result sinks (names kept from when sinks lived in the scrape app)."""

from celery import shared_task

from .delivery import sink_deliver, sinks_tick


@shared_task(name="scrape.deliver", soft_time_limit=110, time_limit=120)
def deliver_task(sink_id: int) -> int:
    """Deliver a sink's due records (sinks/delivery.py)."""
    return sink_deliver(sink_id)


@shared_task(name="scrape.sinks_tick", soft_time_limit=50, time_limit=60)
def sinks_tick_task() -> dict:
    return sinks_tick()
