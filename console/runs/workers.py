"""Which workers are alive and which queues they consume (from their heartbeats, console/runs/signals.py),
and plain warnings about who will do the work: a stage that owes work no live worker consumes,
the control queue nobody consumes (jobs never end, leases never come back), and no scheduler
(celery beat) while work is owed or a job is open. The overview, the dashboard, the API's
`progress` and the crawl command all show the same sentences (pipeline_warnings)."""

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from console.models import Job, WorkerBeat
from crawlproject.queues import CONTROL, FETCH, RENDER, STAGES

OPEN_STATES = (Job.State.QUEUED, Job.State.RUNNING)  # a paused job waits for nobody


def workers_alive() -> list[WorkerBeat]:
    since = timezone.now() - timedelta(seconds=settings.CONSOLE_WORKER_STALE_SECONDS)
    return list(WorkerBeat.objects.filter(seen_at__gte=since).exclude(queues="").order_by("name"))  # beat has none


def queues_consumed(workers: list[WorkerBeat] | None = None) -> set[str]:
    return {q for w in (workers if workers is not None else workers_alive()) for q in w.queue_list()}


def jobs_open(projects=None) -> bool:
    """Whether a job is queued or running (of these projects, when given)."""
    jobs = Job.objects.filter(state__in=OPEN_STATES)
    return (jobs if projects is None else jobs.filter(project__in=projects)).exists()


def pipeline_warnings(backlog: dict[str, int], *, rendered: bool = False, workers=None, job_open: bool) -> list[str]:
    """Every warning about who will do the work: stages with owed rows and no consumer, the control
    queue with no consumer, no scheduler."""
    workers = workers if workers is not None else workers_alive()
    return (
        stage_warnings(backlog, rendered=rendered, workers=workers)
        + control_warnings(job_open=job_open, workers=workers)
        + scheduler_warnings(sum(backlog.values()), job_open=job_open)
    )


def stage_warnings(backlog: dict[str, int], *, rendered: bool = False, workers=None) -> list[str]:
    """One sentence per stage whose rows owe work while no live worker consumes its queue.
    `rendered`: the fetch stage's pages go to the render queue (projects that render JavaScript)."""
    consumed = queues_consumed(workers)
    warnings = []
    for stage, owed in backlog.items():
        queue = STAGES[RENDER if stage == FETCH and rendered else stage].queue
        if owed and queue not in consumed:
            warnings.append(
                f"{owed} rows owe the {stage} stage and no worker consumes the '{queue}' queue: {_start_worker(queue)}."
            )
    return warnings


def _start_worker(queue: str) -> str:
    """A command that starts a worker for the queue here: `make serve` embedded (it starts one on every
    queue); distributed, where `serve` starts none unless asked, a worker of its own."""
    if settings.CELERY_EMBEDDED_BROKER:
        return "run `make serve`, which starts a worker on every queue"
    return f"start one with `make worker-{queue}`, or `.venv/bin/celery -A crawlproject worker -Q {queue},{CONTROL}`"


def control_warnings(*, job_open: bool, workers=None) -> list[str]:
    """A warning when no live worker consumes the control queue while workers run or a job is open:
    the reaper, the jobs tick and the sinks tick ride it, so jobs stay `running` with nothing owed
    and the leases of dead workers never come back."""
    workers = workers if workers is not None else workers_alive()
    if CONTROL in queues_consumed(workers) or not (workers or job_open):
        return []
    return [
        f"No worker consumes the '{CONTROL}' queue: jobs are never ended and expired leases never handed back. "
        f"Every worker takes it unless started with `-X {CONTROL}`: start one without that option, e.g. "
        f"`.venv/bin/celery -A crawlproject worker -Q {FETCH},{CONTROL}`."
    ]


SCHEDULER_STALE_SECONDS = 60


def scheduler_warnings(owed: int, *, job_open: bool = False) -> list[str]:
    """A warning when work is owed or a job is open, and beat's own tick has not written its
    heartbeat (console/runs/beat.py) for a minute: postponed and retried pages, recrawl ticks and the end
    of jobs all wait for it."""
    if not owed and not job_open:
        return []
    beats = WorkerBeat.objects.filter(queues="", name__startswith="celery-beat@")
    last = beats.order_by("-seen_at").values_list("seen_at", flat=True).first()
    if last is not None and (timezone.now() - last).total_seconds() < SCHEDULER_STALE_SECONDS:
        return []
    since = "has never run" if last is None else f"last ran {last:%Y-%m-%d %H:%M:%S} UTC"
    start = "Run `make serve`"
    if not settings.CELERY_EMBEDDED_BROKER:  # `serve` starts no beat there unless asked
        start = "Run one: `make beat`, or `.venv/bin/celery -A crawlproject beat`"
    return [
        f"No scheduler (celery beat) is running ({since}): postponed and retried pages, recrawl ticks and job ends "
        f"wait for it. {start}."
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
