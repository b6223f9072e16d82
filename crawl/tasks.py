"""Thin Celery tasks of the crawl app: take ids, call one service (the frontier publishes what is
owed next; the fetch stage's tasks are in fetch/tasks.py). `job`, where a task takes it, is the
console's job the message was published for: the task-prerun hook (crawlproject/logconfig.py) puts
it in the log context and on the messages the task publishes."""

from celery import shared_task
from django.db import transaction

from crawl.frontier.reaper import reap
from crawl.frontier.recrawl import pages_dispatch, pages_recrawl_all, tick_owes
from crawl.frontier.stages import job_scope
from crawl.models import Project
from crawl.signals import recrawl_due
from crawlproject.control_tasks import DISPATCH, REAP


@shared_task(name=DISPATCH.name, **DISPATCH.limits())
def dispatch_task(project_id: int | None = None) -> int:
    """Beat's recrawl tick, as the project's schedule says: queue its due pages (their revisit times
    are in the rows), or every done page (recrawl everything). When there are some, a project
    stopped by a cancelled job is active again, and `recrawl_due` asks whoever keeps runs for the
    job they run as (the console makes the tick a job): the messages carry it."""
    if project_id is None:
        with transaction.atomic():
            return len(pages_dispatch())
    mode = Project.objects.filter(id=project_id).values_list("recrawl_mode", flat=True).first()
    job = None
    with transaction.atomic():
        if mode is not None and tick_owes(project_id=project_id, mode=mode):
            Project.objects.filter(id=project_id, status=Project.Status.STOPPED).update(status=Project.Status.ACTIVE)
            answers = recrawl_due.send(sender=dispatch_task, project_id=project_id)
            job = next((answer for _receiver, answer in answers if answer), None)
        with job_scope(job):
            if mode == Project.RecrawlMode.ALL:
                return len(pages_recrawl_all(project_id=project_id))
            return len(pages_dispatch(project_id=project_id))


@shared_task(name=REAP.name, **REAP.limits())
def reap_task(project_id: int | None = None) -> dict:
    return vars(reap(project_id=project_id))
