"""The console's one periodic task: jobs start when their first row is claimed and end when their
project owes no more work."""

from celery import shared_task

from console.jobs import jobs_tick


@shared_task(name="console.jobs_tick", soft_time_limit=50, time_limit=60)
def jobs_tick_task() -> dict:
    return jobs_tick()
