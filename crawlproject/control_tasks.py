"""The tasks besides the stages', declared once: each one's name, queue, time limits and, for the
periodic ones, beat's entry. The task decorators, the routes, beat's schedule and the embedded crawl
(console/runs/job_runs.py, which runs the periodic ticks itself while it waits) all read this table."""

from dataclasses import dataclass

from crawlproject.queues import CONTROL, EXTRACT, STAGES


@dataclass(frozen=True)
class ControlTask:
    name: str  # the Celery task's registered name (stable: messages in flight and beat rows carry it)
    module: str  # the module that defines it (the embedded crawl imports only the ones it runs)
    queue: str
    soft_time_limit: int
    time_limit: int
    beat: str = ""  # the name of beat's entry for it ("": not periodic)
    every: int | str = 0  # seconds between beat's runs, or the name of the setting that holds them
    embedded: bool = False  # the embedded crawl runs it itself while it waits for its job's end
    per_project: bool = False  # ... for its own project only (the task takes `project_id`)

    def limits(self) -> dict[str, int]:
        """The task decorator's soft_time_limit and time_limit."""
        return {"soft_time_limit": self.soft_time_limit, "time_limit": self.time_limit}


DISPATCH = ControlTask("crawl.dispatch", "crawl.tasks", CONTROL, 50, 60)  # beat rows per project (recrawl_schedules.py)
REAP = ControlTask(
    "crawl.reap", "crawl.tasks", CONTROL, 50, 60,
    beat="crawl-reaper", every="CRAWL_REAP_INTERVAL_SECONDS", embedded=True, per_project=True,
)  # fmt: skip
JOBS_TICK = ControlTask(
    "console.jobs_tick",
    "console.tasks",
    CONTROL,
    50,
    60,
    beat="console-jobs",
    every="CONSOLE_JOBS_TICK_SECONDS",
    embedded=True,
)
SINKS_TICK = ControlTask(
    "scrape.sinks_tick", "sinks.tasks", CONTROL, 50, 60, beat="scrape-sinks", every=10, embedded=True
)
PRUNE = ControlTask(
    "console.prune", "console.tasks", CONTROL, 110, 120, beat="console-prune", every=300
)  # console/exports/retention.py
MONITORS_TICK = ControlTask(
    "console.monitors_tick",
    "console.tasks",
    CONTROL,
    100,
    120,
    beat="console-monitors",
    every="CONSOLE_MONITORS_TICK_SECONDS",
)
JOB_ENDED = ControlTask(
    "console.job_ended", "console.tasks", CONTROL, 100, 120
)  # a job's end announced to its targets and sinks
DELIVER = ControlTask("scrape.deliver", "sinks.tasks", EXTRACT, 110, 120)  # result sinks: their I/O beside extraction
DEBUG_RUN = ControlTask(
    "console.debug_run", "console.tasks", EXTRACT, 240, 300
)  # the debugger's draft code, where extraction runs

# In the order the embedded crawl runs them: the reaper first, then the ticks that end jobs and deliver.
CONTROL_TASKS = {
    task.name: task
    for task in (DISPATCH, REAP, JOBS_TICK, SINKS_TICK, PRUNE, MONITORS_TICK, JOB_ENDED, DELIVER, DEBUG_RUN)
}
EMBEDDED_TASKS = tuple(task for task in CONTROL_TASKS.values() if task.embedded)
TASK_ROUTES = {
    **{stage.task: {"queue": stage.queue} for stage in STAGES.values()},
    **{task.name: {"queue": task.queue} for task in CONTROL_TASKS.values()},
}


def beat_schedule(settings: dict) -> dict[str, dict]:
    """CELERY_BEAT_SCHEDULE, with `settings` the values the `every` names stand for: each periodic task
    every so many seconds, and skipped when it waited as long in the queue (the next one is due)."""
    schedule = {}
    for task in CONTROL_TASKS.values():
        if task.beat:
            seconds = float(settings[task.every] if isinstance(task.every, str) else task.every)
            schedule[task.beat] = {"task": task.name, "schedule": seconds, "options": {"expires": seconds}}
    return schedule
