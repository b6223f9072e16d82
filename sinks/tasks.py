"""Thin Celery tasks of the result sinks (names kept from when sinks lived in the scrape app)."""

from celery import shared_task

from crawlproject.control_tasks import DELIVER, SINKS_TICK

from .delivery import sink_deliver, sinks_tick


@shared_task(name=DELIVER.name, **DELIVER.limits())
def deliver_task(sink_id: int) -> int:
    """Deliver a sink's due records (sinks/delivery.py)."""
    return sink_deliver(sink_id)


@shared_task(name=SINKS_TICK.name, **SINKS_TICK.limits())
def sinks_tick_task() -> dict:
    return sinks_tick()
