"""The console's periodic tasks: jobs start when their first row is claimed and end when their
project owes no more work; monitors check every project and announce their alerts; old rows are
pruned (console/exports/retention.py)."""

from celery import shared_task

from console.exports.retention import prune
from console.runs.jobs import jobs_tick
from crawlproject.control_tasks import DEBUG_RUN, JOB_ENDED, JOBS_TICK, MONITORS_TICK, PRUNE


@shared_task(name=JOBS_TICK.name, **JOBS_TICK.limits())
def jobs_tick_task() -> dict:
    return jobs_tick()


@shared_task(name=PRUNE.name, **PRUNE.limits())
def prune_task() -> dict:
    return prune()


@shared_task(name=MONITORS_TICK.name, **MONITORS_TICK.limits())
def monitors_tick_task() -> dict:
    from console.health.monitors import monitors_tick

    return monitors_tick()


@shared_task(name=DEBUG_RUN.name, **DEBUG_RUN.limits())
def debug_run_task(run_id: int) -> str:
    """The debugger's run: the draft's code runs in a child process with its own, shorter limits."""
    from console.debugger import debug_run_execute

    return debug_run_execute(run_id)


@shared_task(name=JOB_ENDED.name, **JOB_ENDED.limits())
def job_ended_task(job_id: int) -> bool:
    from console.runs.job_notices import job_end_announce

    return job_end_announce(job_id=job_id)
