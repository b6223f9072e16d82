"""Running a job to its end in this process, the embedded workers started and stopped here: what
crawlhub.run() and the crawl command do. SIGTERM stops it as Ctrl-C does: the workers stop and
the job is paused, so the next run resumes it."""

import contextlib
import functools
import importlib
import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import kombu.exceptions
import redis.exceptions
from celery import current_app
from django import db
from django.conf import settings

from console.models import Job
from console.runs.jobs import job_current, job_finish
from console.runs.steering import ProjectFinished, crawl_start, job_pause
from console.runs.workers import control_warnings, stage_warnings
from console.selectors import project_progress, project_work_owed, stage_backlog
from crawl.frontier.reaper import reap
from crawl.models import Project
from crawl.services.projects import seed_problem
from crawlproject.control_tasks import EMBEDDED_TASKS
from crawlproject.processes import EmbeddedWorker
from sinks.delivery import sinks_owed


@dataclass
class Run:
    """How run() ended: the job (its state and counts: `job.state`, console.runs.jobs.job_counts(job)),
    whether the project's work was all done, and whether a signal (Ctrl-C, SIGTERM) stopped it.
    `finished`: the project had nothing left to crawl, so no job was made (as Start answers); `job`
    is then the project's last one (None if it has none)."""

    job: Job | None
    completed: bool
    interrupted: bool = False
    embedded: bool = False  # its workers ran in this process's children (and stopped with it)
    finished: ProjectFinished | None = None


log = logging.getLogger("crawlhub.run")
T = TypeVar("T")
POLL_SECONDS = 0.2  # how soon the end of the crawl is noticed (two index probes: project_work_owed)
COUNT_EVERY_SECONDS = 2.0  # the full counts by state (progress display, stall detection), at least this apart
REAP_EVERY_SECONDS = 5.0
OUTAGE_WAIT_SECONDS = 2.0
OUTAGES = (db.Error, kombu.exceptions.OperationalError, redis.exceptions.ConnectionError)
OUTAGE_PATIENCE_SECONDS = 120.0  # how long the start of a run waits for the database or broker to come back


def stall_seconds() -> float:
    """No change in the rows for this long, with work owed, means a stuck embedded worker: longer
    than a lease plus a republish, so the reaper has had its chance to move the work."""
    return 2 * settings.CRAWL_LEASE_SECONDS + settings.CRAWL_REPUBLISH_SECONDS


def crawl_run(
    project: Project,
    *,
    seeds: dict[str, list[str]],
    recrawl: bool,
    workers: int | None,
    timeout: float,
    on_progress: Callable[[dict, float], None] | None,
    progress_every: float,
    on_notice: Callable[[str], None] | None,
    private_flag: str = "allow_private=True",
) -> Run:
    """crawlhub.run(): begin (or resume) the job, queue its seeds, wait for its end, stop the workers.
    Each seed that will be refused is named first, with the reason (and `private_flag`, what allows
    a private address where it is the reason)."""
    started, notice = time.monotonic(), on_notice or log.info
    given = [url for urls in seeds.values() for url in urls]
    for refusal in through_outages(lambda: seeds_refused(project, given, flag=private_flag), notice=notice):
        notice(refusal)
    try:
        job = through_outages(lambda: job_start(project, seeds=seeds, recrawl=recrawl, notice=notice), notice=notice)
    except ProjectFinished as finished:
        notice(str(finished))
        return Run(job=Job.objects.filter(project=project).order_by("-id").first(), completed=True, finished=finished)
    completed = interrupted = False
    worker = None
    with sigterm_interrupts():
        try:
            worker = _start_worker(workers)
            try:
                waiting = Waiting(project, worker, notice=notice, on_progress=on_progress, every=progress_every)
                completed = waiting.wait(timeout=timeout, started=started)
            except KeyboardInterrupt:
                interrupted = True
            if completed:
                job_finish(job=job)
            elif worker:
                job_pause(job=job)  # no worker is left to run it: it is paused, not "running"
        finally:
            if worker:
                if completed:
                    with contextlib.suppress(*OUTAGES):
                        worker.drain()
                worker.stop()
    job.refresh_from_db()
    return Run(job=job, completed=completed, interrupted=interrupted, embedded=worker is not None)


def job_start(project: Project, *, seeds: dict[str, list[str]], recrawl: bool, notice: Callable[[str], None]) -> Job:
    """Start the project as every door does (console.runs.steering.crawl_start), with the seeds given
    (refused ones become failed rows saying why), and say whether the job is new, the running one
    joined or the paused one resumed. A finished project is refused as Start refuses it
    (ProjectFinished: no empty job hides its last run), unless `recrawl`."""
    before = job_current(project)
    job, _queued = crawl_start(
        project=project, trigger=Job.Trigger.COMMAND, seeds=seeds, recrawl=recrawl, refuse_finished=not recrawl
    )
    if before is None or before.id != job.id:
        notice(f"job {job.id} of project {project.name}")
    elif before.state == Job.State.PAUSED:
        notice(f"resumed the paused job {job.id} of project {project.name}")
    else:
        notice(f"joined the running job {job.id} of project {project.name}")
    return job


def through_outages(action: Callable[[], T], *, notice: Callable[[str], None], patience=OUTAGE_PATIENCE_SECONDS) -> T:
    """`action()`, tried again while the database or the broker is down (a restart, a fail-over), as
    the workers wait for them; the last error is raised after `patience` seconds. The action must be
    harmless to repeat (a start joins the job it began)."""
    deadline = time.monotonic() + patience
    while True:
        try:
            return action()
        except OUTAGES as exc:
            if time.monotonic() > deadline:
                raise
            _outage_notice(exc, notice)
            time.sleep(OUTAGE_WAIT_SECONDS)


def _outage_notice(exc: Exception, notice: Callable[[str], None]) -> None:
    with contextlib.suppress(db.Error):
        db.connection.close()  # the next query opens a fresh connection
    notice(f"waiting for the database or broker: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")


SEEDS_CHECKED = 20  # the project's own seeds checked before a run (each is a DNS lookup)


def seeds_refused(project: Project, given: list[str], *, flag: str) -> list[str]:
    """A sentence for each seed (those given, and the project's first active ones) the crawler will
    refuse, with the reason and the flag that would allow it."""
    own = project.seeds.filter(active=True).order_by("id").values_list("url", flat=True)[:SEEDS_CHECKED]
    refusals = []
    for url in dict.fromkeys([*given, *own]):
        problem = seed_problem(url, allow_private=project.allow_private)
        if problem is not None:
            problem = problem.replace("(a project may allow private networks)", f"({flag} allows it)")
            refusals.append(f"refused seed {url}: {problem}")
    return refusals


@contextlib.contextmanager
def sigterm_interrupts():
    """SIGTERM (a `timeout`, a supervisor, a CI job) raises KeyboardInterrupt, as Ctrl-C does, so the
    embedded workers are stopped and the job paused instead of left running with no parent. Once:
    a second SIGTERM does not cut the stop short. Only the main thread may set handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _start_worker(workers: int | None) -> EmbeddedWorker | None:
    count = workers if workers is not None else (2 if settings.CELERY_EMBEDDED_BROKER else 0)
    if count <= 0:
        return None
    worker = EmbeddedWorker(concurrency=count)
    worker.start()
    return worker


def control_ticks(*, project_id: int) -> None:
    """What beat would send, run here in the table's order (crawlproject/control_tasks.py): the
    reaper for this project, then the ticks that end jobs and deliver to sinks."""
    _tasks_registered()
    for task in EMBEDDED_TASKS:
        current_app.tasks[task.name](**({"project_id": project_id} if task.per_project else {}))


@functools.cache
def _tasks_registered() -> None:
    """Import the modules of the tasks it runs, so they are known by name (not every app's tasks, as
    a worker's start does: that costs a crawl command a second of CPU)."""
    for module in sorted({task.module for task in EMBEDDED_TASKS}):
        importlib.import_module(module)


class Waiting:
    """The wait for the project to owe no more work: reaps, ticks the jobs and sinks, restarts a
    stuck embedded worker, rides out database and broker outages, reports progress."""

    def __init__(self, project: Project, worker, *, notice, on_progress, every: float):
        self.project, self.worker, self.notice = project, worker, notice
        self.on_progress, self.every, self.warned = on_progress, every, []

    def wait(self, *, timeout: float, started: float) -> bool:
        """True when the work is done; False when `timeout` (seconds from `started`) passed first."""
        last_reap, last_line = float("-inf"), time.monotonic()  # reap at once: work of an interrupted run
        seen, last_change, last_count, progress = None, time.monotonic(), float("-inf"), None
        count_every = COUNT_EVERY_SECONDS
        while True:
            now = time.monotonic()
            if timeout and now - started > timeout:
                return False
            if self.worker:
                stalled = now - last_change > stall_seconds()
                self.worker.keep_alive(stalled=stalled)
                if stalled:
                    last_change = now  # the restarted worker gets its own time
            try:
                if now - last_reap >= REAP_EVERY_SECONDS:
                    control_ticks(project_id=self.project.id)
                    last_reap = now
                if now - last_count >= count_every or not project_work_owed(self.project.id):
                    counting = time.monotonic()
                    progress, last_count = project_progress(self.project), time.monotonic()
                    # It counts every row of the project (0.2 s at 100,000 rows): at most ~1% of a core of
                    # the database; the end of the crawl is seen by the cheap probe in between.
                    count_every = max(COUNT_EVERY_SECONDS, 100 * (last_count - counting))
                    if progress != seen:
                        seen, last_change = progress, now
                    if self.worker is None:
                        self._warn_unworked()
                    if progress["pending"] == 0 and not sinks_owed(self.project.id, failing=False):
                        reap(project_id=self.project.id)  # a last sweep: stale temp files of killed downloads
                        return True
            except OUTAGES as exc:
                # The database or the broker is down (restarting, failing over): the work is in the
                # rows, so wait for them to come back instead of giving up on the crawl.
                self._outage(exc)
                time.sleep(OUTAGE_WAIT_SECONDS)
                continue
            if self.on_progress and now - last_line >= self.every:
                self.on_progress(progress, now - started)
                last_line = now
            time.sleep(POLL_SECONDS)

    def _warn_unworked(self) -> None:
        """Distributed: say at once (and again when it changes) that owed work has no worker to take
        it, instead of waiting in silence for workers that are not there."""
        warnings = stage_warnings(stage_backlog(self.project), rendered=self.project.render_js)
        warnings += control_warnings(job_open=True)  # this command ends its own job; others' would wait
        if warnings and warnings != self.warned:
            for warning in warnings:
                self.notice(f"waiting: {warning}")
        self.warned = warnings

    def _outage(self, exc: Exception) -> None:
        _outage_notice(exc, self.notice)
