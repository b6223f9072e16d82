"""The pipeline's stages, declared once: each stage's name, queue, task name, claim size setting and
time limits. Queues, task routes, the task decorators, the frontier's publishers, the reaper, the
workers page and the schedules all read this table (crawl/frontier/stages.py knows the order)."""

from dataclasses import dataclass

FETCH = "fetch"
EXTRACT = "extract"
DOWNLOAD = "download"
RENDER = "render"  # fetch in headless Chromium, for projects with render_js (needs a worker with chromium)


@dataclass(frozen=True)
class Stage:
    name: str
    queue: str
    task: str  # the Celery task's registered name (stable: messages in flight carry it)
    batch_setting: str  # the Django setting with the number of rows one task claims
    soft_time_limit: int | str  # seconds, or the name of the Django setting that holds them
    time_limit: int | str

    def batch(self) -> int:
        from django.conf import settings

        return getattr(settings, self.batch_setting)

    def limits(self) -> dict[str, int]:
        """The task decorator's soft_time_limit and time_limit."""
        from django.conf import settings

        def seconds(value: int | str) -> int:
            return getattr(settings, value) if isinstance(value, str) else value

        return {"soft_time_limit": seconds(self.soft_time_limit), "time_limit": seconds(self.time_limit)}


STAGES = {
    stage.name: stage
    for stage in (
        Stage(FETCH, FETCH, "crawl.fetch_batch", "CRAWL_FETCH_BATCH", 270, 300),
        Stage(RENDER, RENDER, "crawl.render_batch", "CRAWL_RENDER_BATCH", 570, 600),
        Stage(EXTRACT, EXTRACT, "scrape.extract_batch", "CRAWL_EXTRACT_BATCH", 170, 180),
        Stage(
            DOWNLOAD,
            DOWNLOAD,
            "media.download_batch",
            "CRAWL_DOWNLOAD_BATCH",
            "CRAWL_DOWNLOAD_SOFT_TIME_LIMIT",
            "CRAWL_DOWNLOAD_TIME_LIMIT",
        ),
    )
}
STAGE_QUEUES = tuple(stage.queue for stage in STAGES.values())
STAGE_TASKS = frozenset(stage.task for stage in STAGES.values())
# Housekeeping (reaper, recrawl ticks, jobs tick, sinks tick, pruning): every worker consumes it beside its
# stage queues, so it never waits behind a stage's backlog.
CONTROL = "control"
QUEUES = (*STAGE_QUEUES, CONTROL)


def with_control(queues: str) -> str:
    """A worker's -Q list with the control queue added (every worker consumes it)."""
    names = [q for q in queues.split(",") if q]
    return ",".join(names if CONTROL in names else [*names, CONTROL])
