"""Each project's recrawl schedule, kept in sync with django-celery-beat's PeriodicTask rows.

One PeriodicTask per project, found by a fixed name, so editing the schedule updates that row and
never adds a second one. What a tick does is the project's `recrawl_mode`: "revisit what is due"
queues the pages whose own revisit time (in the database) has come; "recrawl everything" queues
every finished page. The schedule runs while the project is active or stopped (a cancelled job);
Pause turns it off.
"""

import json

from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from crawl.models import Project
from crawl.validators import crontab_fields
from crawlproject.control_tasks import DISPATCH
from crawlproject.queues import FETCH, STAGES


def task_name(project: Project) -> str:
    return f"crawlhub recrawl dispatcher: project {project.id}"


def schedule_sync(project: Project) -> PeriodicTask | None:
    """Create, update or remove the project's dispatcher task to match its schedule fields."""
    name = task_name(project)
    if not project.recrawl_every_minutes and not project.recrawl_crontab:
        PeriodicTask.objects.filter(name=name).delete()
        return None
    when = _schedule_of(project)
    defaults = {
        "task": DISPATCH.name,
        "kwargs": json.dumps({"project_id": project.id}),
        "enabled": project.status != Project.Status.PAUSED,
        "interval": when if isinstance(when, IntervalSchedule) else None,
        "crontab": when if isinstance(when, CrontabSchedule) else None,
        "queue": STAGES[FETCH].queue,
        "expire_seconds": 60,  # a tick that waited a minute in the queue is skipped, not run late
    }
    task, _ = PeriodicTask.objects.update_or_create(name=name, defaults=defaults)
    return task


def tick_seconds(project: Project) -> int:
    """How often an interval schedule ticks: every N minutes; revisiting what is due, as often as the
    project's hubs are revisited when that is sooner (such a tick only queues pages whose own
    revisit time has come)."""
    every = project.recrawl_every_minutes * 60
    if project.recrawl_mode == Project.RecrawlMode.ALL:
        return max(1, every)
    return max(1, min(every, project.hub_revisit_seconds))


def _schedule_of(project: Project):
    if project.recrawl_every_minutes:
        interval, _ = IntervalSchedule.objects.get_or_create(
            every=tick_seconds(project), period=IntervalSchedule.SECONDS
        )
        return interval
    crontab, _ = CrontabSchedule.objects.get_or_create(**crontab_fields(project.recrawl_crontab), timezone="UTC")
    return crontab
