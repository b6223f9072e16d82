"""Thin Celery tasks of the fetch stage: take ids, call one service (the frontier publishes what is
owed next). Their names stay the crawl app's (`crawl.fetch_batch`, `crawl.render_batch`): messages
in flight carry them. `job` is the console's job the message was published for (crawl/tasks.py)."""

from celery import shared_task

from crawlproject.queues import FETCH, RENDER, STAGES

from .services import pages_fetch


@shared_task(name=STAGES[FETCH].task, bind=True, **STAGES[FETCH].limits())
def fetch_batch(self, page_ids: list[int], job: int | None = None, wake: str | None = None) -> int:
    """`page_ids` empty: a wake-up (booked for the time `wake`), which claims what is ready."""
    return len(pages_fetch(page_ids=page_ids, worker=self.request.hostname or "", wake=wake))


@shared_task(name=STAGES[RENDER].task, bind=True, **STAGES[RENDER].limits())
def render_batch(self, page_ids: list[int], job: int | None = None, wake: str | None = None) -> int:
    return len(pages_fetch(page_ids=page_ids, worker=self.request.hostname or "", render=True, wake=wake))
