"""The console's periodic tasks: jobs start when their first row is claimed and end when their
project owes no more work; monitors check every project and announce their alerts; old rows are
pruned (console/exports/retention.py)."""

from celery import shared_task

from console.exports.retention import prune
from console.runs.jobs import jobs_tick


@shared_task(name="console.jobs_tick", soft_time_limit=50, time_limit=60)
def jobs_tick_task() -> dict:
    return jobs_tick()


@shared_task(name="console.prune", soft_time_limit=110, time_limit=120)
def prune_task() -> dict:
    return prune()


@shared_task(name="console.monitors_tick", soft_time_limit=100, time_limit=120)
def monitors_tick_task() -> dict:
    from console.health.monitors import monitors_tick

    return monitors_tick()


@shared_task(name="console.debug_run", soft_time_limit=240, time_limit=300)
def debug_run_task(run_id: int) -> str:
    """The debugger's run: the draft's code runs in a child process with its own, shorter limits."""
    from console.debugger import debug_run_execute

    return debug_run_execute(run_id)


@shared_task(name="console.job_ended", soft_time_limit=100, time_limit=120)
def job_ended_task(job_id: int) -> bool:
    from console.runs.job_notices import job_end_announce

    return job_end_announce(job_id=job_id)
