"""Thin Celery tasks of the crawl app: take ids, call one service (the frontier publishes what is
owed next). `job`, where a task takes it, is the console's job the message was published for: the
task-prerun hook (crawl/logging.py) puts it in the log context and on the messages the task publishes."""

from celery import shared_task
from django.db import transaction

from crawl.frontier.reaper import reap
from crawl.frontier.schedule import pages_dispatch
from crawl.services.fetching import pages_fetch
from crawl.signals import recrawl_dispatched


@shared_task(name="crawl.fetch_batch", bind=True, soft_time_limit=270, time_limit=300)
def fetch_batch(self, page_ids: list[int], job: int | None = None) -> int:
    return len(pages_fetch(page_ids=page_ids, worker=self.request.hostname or ""))


@shared_task(name="crawl.render_batch", bind=True, soft_time_limit=570, time_limit=600)
def render_batch(self, page_ids: list[int], job: int | None = None) -> int:
    return len(pages_fetch(page_ids=page_ids, worker=self.request.hostname or "", render=True))


@shared_task(name="crawl.dispatch", soft_time_limit=50, time_limit=60)
def dispatch_task(project_id: int | None = None) -> int:
    """Beat's recrawl tick: queue the project's due pages (their revisit times are in the rows). When
    it queued any, `recrawl_dispatched` tells whoever keeps runs (the console makes it a job) before
    they are published."""
    with transaction.atomic():
        ids = pages_dispatch(project_id=project_id)
        if ids and project_id is not None:
            recrawl_dispatched.send(sender=dispatch_task, project_id=project_id, page_ids=ids)
    return len(ids)


@shared_task(name="crawl.reap", soft_time_limit=50, time_limit=60)
def reap_task() -> dict:
    return vars(reap())
