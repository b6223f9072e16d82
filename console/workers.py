"""Which workers are alive and which queues they consume (from their heartbeats, console/signals.py),
a plain warning for every stage that owes work no live worker consumes, and one when no scheduler
(celery beat) runs while work is owed."""

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from console.models import WorkerBeat
from crawl.frontier.stages import DOWNLOAD, EXTRACT, FETCH
from crawlproject.queues import RENDER

STAGE_QUEUE = {FETCH: "fetch", EXTRACT: "extract", DOWNLOAD: "download"}


def workers_alive() -> list[WorkerBeat]:
    since = timezone.now() - timedelta(seconds=settings.CONSOLE_WORKER_STALE_SECONDS)
    return list(WorkerBeat.objects.filter(seen_at__gte=since).order_by("name"))


def queues_consumed(workers: list[WorkerBeat] | None = None) -> set[str]:
    return {q for w in (workers if workers is not None else workers_alive()) for q in w.queue_list()}


def stage_warnings(backlog: dict[str, int], *, rendered: bool = False, workers=None) -> list[str]:
    """One sentence per stage whose rows owe work while no live worker consumes its queue.
    `rendered`: the fetch stage's pages go to the render queue (projects that render JavaScript)."""
    consumed = queues_consumed(workers)
    warnings = []
    for stage, owed in backlog.items():
        queue = RENDER if stage == FETCH and rendered else STAGE_QUEUE[stage]
        if owed and queue not in consumed:
            warnings.append(
                f"{owed} rows owe the {stage} stage and no worker consumes the '{queue}' queue: run `make serve`, "
                f"or `celery -A crawlproject worker -Q {queue}`."
            )
    return warnings


SCHEDULER_ENTRY = "console-jobs"  # beat's entry (settings.CELERY_BEAT_SCHEDULE) whose last run proves it alive
SCHEDULER_STALE_SECONDS = 60


def scheduler_warnings(owed: int) -> list[str]:
    """A warning when work is owed and beat has not run its jobs tick for a minute: postponed and
    retried pages, recrawl ticks and the end of jobs all wait for it."""
    from django_celery_beat.models import PeriodicTask

    if not owed:
        return []
    last = PeriodicTask.objects.filter(name=SCHEDULER_ENTRY).values_list("last_run_at", flat=True).first()
    if last is not None and (timezone.now() - last).total_seconds() < SCHEDULER_STALE_SECONDS:
        return []
    since = "has never run" if last is None else f"last ran {last:%Y-%m-%d %H:%M:%S} UTC"
    return [
        f"No scheduler (celery beat) is running ({since}): postponed and retried pages, recrawl ticks and job ends "
        "wait for it. Run `make serve`, or `celery -A crawlproject beat`."
    ]


def workers_snapshot() -> list[dict]:
    now = timezone.now()
    return [
        {
            "name": w.name,
            "queues": w.queue_list(),
            "concurrency": w.concurrency,
            "seen_seconds_ago": round((now - w.seen_at).total_seconds(), 1),
            "up_since": w.started_at.isoformat(),
        }
        for w in workers_alive()
    ]
