"""Recrawl schedules: what a tick does is named per schedule (revisit what is due, or recrawl
everything), cancelling a job leaves the schedule running, and pausing turns it off."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from console.models import Job
from console.runs import jobs, steering
from crawl.models import Page, Project
from crawl.services.recrawl_schedules import task_name, tick_seconds
from crawl.tasks import dispatch_task
from tests.console.test_admin_console import add_page

T = Job.Trigger.COMMAND


@pytest.fixture
def project(make_project):
    project = make_project(name="watch", allow_private=True, recrawl_every_minutes=60)
    project.save()  # the schedule is kept in step on save
    return project


def schedule_enabled(project: Project) -> bool:
    return PeriodicTask.objects.get(name=task_name(project)).enabled


def later(hours: int = 1):
    return timezone.now() + timedelta(hours=hours)


def test_cancelling_a_job_leaves_the_recrawl_schedule_running(project):
    job, _ = jobs.job_begin(project=project, kind=Job.Kind.RECRAWL, trigger=T)
    owed = add_page(project, "http://a.test/owed", "queued")
    due = add_page(project, "http://a.test/due", "done", next_fetch_at=timezone.now() - timedelta(minutes=1))
    assert steering.job_cancel(job=job)
    assert Project.objects.get(id=project.id).status == "stopped", "no work is handed out"
    assert schedule_enabled(project), "cancelling one run does not turn monitoring off"
    assert dispatch_task(project_id=project.id) == 1, "the next tick recrawls as scheduled"
    assert Project.objects.get(id=project.id).status == "active"
    assert Page.objects.get(id=due.id).state == "queued"
    assert Page.objects.get(id=owed.id).state == "queued", "the cancelled job's owed rows are kept"
    tick = Job.objects.exclude(id=job.id).get()
    assert (tick.kind, tick.trigger) == ("scheduled", "schedule")


def test_pausing_a_project_turns_its_schedule_off_and_resume_on(project):
    assert steering.project_pause(project=project)
    assert not schedule_enabled(project)
    add_page(project, "http://a.test/due", "done", next_fetch_at=timezone.now() - timedelta(minutes=1))
    assert dispatch_task(project_id=project.id) == 0, "a paused project's tick queues nothing"
    assert Project.objects.get(id=project.id).status == "paused"
    steering.project_resume(project=project)
    assert schedule_enabled(project)


def test_a_stopped_project_can_still_be_paused(project):
    job, _ = jobs.job_begin(project=project, kind=Job.Kind.CRAWL, trigger=T)
    steering.job_cancel(job=job)
    assert steering.project_pause(project=project)
    assert (Project.objects.get(id=project.id).status, schedule_enabled(project)) == ("paused", False)


def test_revisit_what_is_due_queues_only_the_due_pages(project):
    due = add_page(project, "http://a.test/due", "done", next_fetch_at=timezone.now() - timedelta(minutes=1))
    fresh = add_page(project, "http://a.test/fresh", "done", next_fetch_at=later())
    assert project.recrawl_mode == "due", "the default: adaptive revisits"
    assert dispatch_task(project_id=project.id) == 1
    assert (Page.objects.get(id=due.id).state, Page.objects.get(id=fresh.id).state) == ("queued", "done")


def test_recrawl_everything_queues_every_finished_page_at_each_tick(project):
    project.recrawl_mode = Project.RecrawlMode.ALL
    project.recrawl_every_minutes, project.recrawl_crontab = None, "0 3 * * *"
    project.save()
    pages = [add_page(project, f"http://a.test/{n}", "done", next_fetch_at=later(24)) for n in range(3)]
    failed = add_page(project, "http://a.test/gone", "failed", error_code="http_404")
    assert dispatch_task(project_id=project.id) == 3, "0 3 * * * recrawls the site nightly"
    assert {p.state for p in Page.objects.filter(id__in=[p.id for p in pages])} == {"queued"}
    assert Page.objects.get(id=failed.id).state == "failed"
    (job,) = Job.objects.all()
    assert job.kind == "scheduled"
    task = PeriodicTask.objects.get(name=task_name(project))
    assert (task.crontab.minute, task.crontab.hour) == ("0", "3")


def test_an_interval_recrawling_everything_ticks_at_its_own_interval(project):
    project.recrawl_mode, project.hub_revisit_seconds = Project.RecrawlMode.ALL, 900
    project.save()
    assert tick_seconds(project) == 3600, "not shortened to the hubs' revisit: each tick recrawls everything"
    task = PeriodicTask.objects.get(name=task_name(project))
    assert task.interval.every == 3600
    project.recrawl_mode = Project.RecrawlMode.DUE
    project.save()
    assert PeriodicTask.objects.get(name=task_name(project)).interval.every == 900


def test_the_admin_offers_both_modes_named_plainly(project, admin_client):
    html = admin_client.get(f"/admin/crawl/project/{project.id}/change/").content.decode()
    assert "revisit what is due" in html and "recrawl everything" in html
