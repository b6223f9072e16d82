"""Thin Celery tasks of the crawl app: take ids, call one service (the frontier publishes what is
owed next). `job`, where a task takes it, is the console's job the message was published for: the
task-prerun hook (crawl/logging.py) puts it in the log context and on the messages the task publishes."""

from celery import shared_task
from django.db import transaction

from crawl.frontier.reaper import reap
from crawl.frontier.schedule import pages_dispatch, pages_due
from crawl.frontier.stages import job_scope
from crawl.services.fetching import pages_fetch
from crawl.signals import recrawl_due


@shared_task(name="crawl.fetch_batch", bind=True, soft_time_limit=270, time_limit=300)
def fetch_batch(self, page_ids: list[int], job: int | None = None, wake: str | None = None) -> int:
    """`page_ids` empty: a wake-up (booked for the time `wake`), which claims what is ready."""
    return len(pages_fetch(page_ids=page_ids, worker=self.request.hostname or "", wake=wake))


@shared_task(name="crawl.render_batch", bind=True, soft_time_limit=570, time_limit=600)
def render_batch(self, page_ids: list[int], job: int | None = None, wake: str | None = None) -> int:
    return len(pages_fetch(page_ids=page_ids, worker=self.request.hostname or "", render=True, wake=wake))


@shared_task(name="crawl.dispatch", soft_time_limit=50, time_limit=60)
def dispatch_task(project_id: int | None = None) -> int:
    """Beat's recrawl tick: queue the project's due pages (their revisit times are in the rows). When
    some are due, `recrawl_due` asks whoever keeps runs for the job they run as (the console makes
    the tick a job), and the messages carry it."""
    job = None
    with transaction.atomic():
        if project_id is not None and pages_due(project_id=project_id).exists():
            answers = recrawl_due.send(sender=dispatch_task, project_id=project_id)
            job = next((answer for _receiver, answer in answers if answer), None)
        with job_scope(job):
            return len(pages_dispatch(project_id=project_id))


@shared_task(name="crawl.reap", soft_time_limit=50, time_limit=60)
def reap_task() -> dict:
    return vars(reap())
