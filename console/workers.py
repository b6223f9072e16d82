"""Which workers are alive and which queues they consume (from their heartbeats, console/signals.py),
a plain warning for every stage that owes work no live worker consumes, and one when no scheduler
(celery beat) runs while work is owed."""

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from console.models import WorkerBeat
from crawlproject.queues import FETCH, RENDER, STAGES


def workers_alive() -> list[WorkerBeat]:
    since = timezone.now() - timedelta(seconds=settings.CONSOLE_WORKER_STALE_SECONDS)
    return list(WorkerBeat.objects.filter(seen_at__gte=since).exclude(queues="").order_by("name"))  # beat has none


def queues_consumed(workers: list[WorkerBeat] | None = None) -> set[str]:
    return {q for w in (workers if workers is not None else workers_alive()) for q in w.queue_list()}


def stage_warnings(backlog: dict[str, int], *, rendered: bool = False, workers=None) -> list[str]:
    """One sentence per stage whose rows owe work while no live worker consumes its queue.
    `rendered`: the fetch stage's pages go to the render queue (projects that render JavaScript)."""
    consumed = queues_consumed(workers)
    warnings = []
    for stage, owed in backlog.items():
        queue = STAGES[RENDER if stage == FETCH and rendered else stage].queue
        if owed and queue not in consumed:
            warnings.append(
                f"{owed} rows owe the {stage} stage and no worker consumes the '{queue}' queue: run `make serve`, "
                f"or `celery -A crawlproject worker -Q {queue}`."
            )
    return warnings


SCHEDULER_STALE_SECONDS = 60


def scheduler_warnings(owed: int) -> list[str]:
    """A warning when work is owed and beat's own tick has not written its heartbeat (console/beat.py)
    for a minute: postponed and retried pages, recrawl ticks and the end of jobs all wait for it."""
    if not owed:
        return []
    beats = WorkerBeat.objects.filter(queues="", name__startswith="celery-beat@")
    last = beats.order_by("-seen_at").values_list("seen_at", flat=True).first()
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
