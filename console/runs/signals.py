"""The console's hooks into the pipeline and its workers: beat's recrawl ticks become jobs, the
warnings of a job's tasks are kept with the job, and every worker reports the queues it consumes."""

import contextlib
import logging
import os
import threading
from datetime import timedelta
from pathlib import Path

from celery import signals as celery_signals
from django.conf import settings
from django.db import close_old_connections, transaction
from django.dispatch import receiver
from django.utils import timezone

from crawl.frontier.reaper import workers_stopped
from crawl.signals import recrawl_due
from crawlproject.jobcontext import CURRENT_JOB
from scrape.spider_versions import spider_version_activated

log = logging.getLogger("crawlhub.console")
LIVENESS_BEATS = 3  # heartbeats a worker may miss before the leases it holds go back


@receiver(recrawl_due, dispatch_uid="console.recrawl_due")
def recrawl_tick_job(sender, project_id: int, **kwargs) -> int:
    """A tick with due pages is a job (a scheduled recrawl), unless the project already runs one,
    which the pages then join. Returns the job's id: the tick's messages carry it."""
    from console.models import Job
    from console.runs.jobs import job_begin
    from crawl.models import Project

    project = Project.objects.get(id=project_id)
    job, _ = job_begin(project=project, kind=Job.Kind.SCHEDULED, trigger=Job.Trigger.SCHEDULE)
    return job.id


@receiver(spider_version_activated, dispatch_uid="console.spider_version_activated")
def spider_version_logged(sender, project, version, **kwargs) -> None:
    """A version activated while the project runs a job is written in that job's log: the job
    records the version it started with, its items the version that made each of them."""
    from console.models import JobLogEntry
    from console.runs.jobs import job_current

    job = job_current(project)
    if job is not None and job.spider_version_id != version.id:
        message = f"spider version {version.number} activated: pages extracted from now on use it"
        JobLogEntry.objects.create(job=job, level="WARNING", logger="crawlhub.spiders", message=message)


class JobLogHandler(logging.Handler):
    """Keeps WARNING and worse records logged on behalf of a job (the task's message named it) as
    JobLogEntry rows, at most CONSOLE_JOB_LOG_LIMIT a job; anything it cannot write is dropped, never
    raised into the task."""

    _local = threading.local()

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.written: dict[int, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        job = getattr(record, "job", None) or CURRENT_JOB.get()
        if not job or getattr(self._local, "busy", False) or record.name.startswith("django.db"):
            return
        limit = settings.CONSOLE_JOB_LOG_LIMIT
        self._local.busy = True
        try:
            from console.models import JobLogEntry

            if job not in self.written:
                self.written[job] = JobLogEntry.objects.filter(job_id=job).count()
            if self.written[job] >= limit:
                return
            self.written[job] += 1
            entry = JobLogEntry(
                job_id=job,
                level=record.levelname,
                logger=record.name[:100],
                worker=_worker_name()[:200],
                url=str(getattr(record, "url", "") or ""),
                code=str(getattr(record, "code", "") or "")[:40],
                message=_message(record)[:4000],
            )
            with transaction.atomic():  # a savepoint inside a task's transaction: its failure stays here
                entry.save()
        except Exception:
            pass
        finally:
            self._local.busy = False


def _message(record: logging.LogRecord) -> str:
    try:
        text = record.getMessage()
    except Exception:
        text = str(record.msg)
    if record.exc_info and record.exc_info[1] is not None:
        text += f" ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
    return text


def _worker_name() -> str:
    from celery import current_task

    request = getattr(current_task, "request", None)
    return getattr(request, "hostname", None) or f"pid {os.getpid()}"


def job_log_install() -> None:
    root = logging.getLogger()
    if not any(isinstance(h, JobLogHandler) for h in root.handlers):
        root.addHandler(JobLogHandler())


job_log_install()


# --- worker heartbeats ----------------------------------------------------------------------------

_beat_stop = threading.Event()
_beat_name: list[str] = []


@receiver(workers_stopped, dispatch_uid="console.workers_stopped")
def workers_gone(sender=None, holders=(), **kwargs) -> dict:
    """For each worker and each lease holder ("worker#pid"), since when the leases claimed in its name
    are abandoned: a worker whose heartbeats stopped (three missed) since now; one that started again
    under the same name since that start (the earlier one is gone); a pool process the worker's last
    heartbeat did not list since that heartbeat."""
    from console.models import WorkerBeat

    now = timezone.now()
    silent = now - timedelta(seconds=LIVENESS_BEATS * settings.CONSOLE_HEARTBEAT_SECONDS)
    beats = {name: row for name, *row in WorkerBeat.objects.values_list("name", "seen_at", "started_at", "processes")}
    gone = {name: (now if seen < silent else started) for name, (seen, started, _) in beats.items()}
    for holder in holders:
        name, _, pid = holder.rpartition("#")
        if name not in beats:
            continue
        seen, started, processes = beats[name]
        listed = processes.split(",") if processes else None  # None: the worker cannot list them
        gone[holder] = now if seen < silent else (seen if listed is not None and pid not in listed else started)
    return gone


@celery_signals.worker_ready.connect(dispatch_uid="console.worker_ready", weak=False)
def worker_ready(sender=None, **kwargs) -> None:
    """Report this worker's queues now and every CONSOLE_HEARTBEAT_SECONDS, from a thread of the
    worker's main process (so a busy pool does not delay it)."""
    name = getattr(sender, "hostname", None) or f"worker-{os.getpid()}"
    queues = sorted(q.name for q in getattr(getattr(sender, "task_consumer", None), "queues", []) or [])
    if not queues:
        queues = sorted(getattr(sender.app.amqp.queues, "consume_from", {}) or [])
    concurrency = getattr(getattr(sender, "pool", None), "num_processes", 0) or 0
    _beat_stop.clear()
    _beat_name[:] = [name]
    thread = threading.Thread(
        target=_heartbeat, args=(name, ",".join(queues), concurrency), name="crawlhub-heartbeat", daemon=True
    )
    thread.start()


def _heartbeat(name: str, queues: str, concurrency: int) -> None:
    from console.models import WorkerBeat

    started = timezone.now()
    while True:
        try:
            close_old_connections()
            WorkerBeat.objects.update_or_create(
                name=name,
                defaults={
                    "queues": queues[:300],
                    "concurrency": concurrency,
                    "pid": os.getpid(),
                    "processes": _processes(),
                    "started_at": started,
                    "seen_at": timezone.now(),
                },
            )
        except Exception as exc:
            log.info("worker heartbeat not written: %r", exc)
        if _beat_stop.wait(settings.CONSOLE_HEARTBEAT_SECONDS):
            break


def _processes() -> str:
    """The worker's processes that may claim work: itself and its pool (its children, read from
    /proc), comma-separated; empty where they cannot be listed."""
    pid = os.getpid()
    try:
        tasks = Path(f"/proc/{pid}/task")
        children = {int(c) for task in tasks.iterdir() for c in (task / "children").read_text().split()}
    except (OSError, ValueError):
        return ""
    return ",".join(str(p) for p in sorted({pid, *children}))


@celery_signals.worker_shutdown.connect(dispatch_uid="console.worker_shutdown", weak=False)
def worker_shutdown(**kwargs) -> None:
    """A worker that stops cleanly leaves the list at once (a killed one ages out of it)."""
    from console.models import WorkerBeat

    _beat_stop.set()
    for name in _beat_name:
        with contextlib.suppress(Exception):
            WorkerBeat.objects.filter(name=name).delete()
