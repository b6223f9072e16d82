"""crawlproject.control_tasks: every task is declared once, in the stage table or the control table,
and Celery, beat and the embedded crawl read them as declared."""

from django.conf import settings

from crawlproject.celery import app
from crawlproject.control_tasks import CONTROL_TASKS, EMBEDDED_TASKS, TASK_ROUTES
from crawlproject.queues import STAGES


def test_every_registered_task_has_the_limits_its_table_declares():
    app.autodiscover_tasks(force=True)
    registered = {
        name: {"soft_time_limit": task.soft_time_limit, "time_limit": task.time_limit}
        for name, task in app.tasks.items()
        if not name.startswith("celery.")
    }
    declared = {stage.task: stage.limits() for stage in STAGES.values()}
    declared |= {task.name: task.limits() for task in CONTROL_TASKS.values()}
    assert registered == declared


def test_each_control_task_is_defined_in_the_module_its_table_names():
    app.autodiscover_tasks(force=True)
    assert {name: app.tasks[name].run.__module__ for name in CONTROL_TASKS} == {
        name: task.module for name, task in CONTROL_TASKS.items()
    }


def test_every_task_is_routed_to_its_declared_queue():
    assert {name: app.amqp.router.route({}, name)["queue"].name for name in TASK_ROUTES} == {
        **{stage.task: stage.queue for stage in STAGES.values()},
        **{task.name: task.queue for task in CONTROL_TASKS.values()},
    }


def test_beat_sends_each_periodic_task_of_the_table_and_nothing_else():
    assert {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()} == {
        task.name for task in CONTROL_TASKS.values() if task.beat
    }
    reaper = settings.CELERY_BEAT_SCHEDULE["crawl-reaper"]
    assert reaper["schedule"] == reaper["options"]["expires"] == settings.CRAWL_REAP_INTERVAL_SECONDS


def test_the_embedded_crawl_runs_the_reaper_first_then_the_jobs_and_sinks_ticks():
    assert [task.name for task in EMBEDDED_TASKS] == ["crawl.reap", "console.jobs_tick", "scrape.sinks_tick"]
    assert all(task.beat for task in EMBEDDED_TASKS)  # what beat would send, where no beat runs
