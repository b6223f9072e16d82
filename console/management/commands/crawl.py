"""python manage.py crawl URL [URL ...]: crawl as a job until the project owes no more work, then
print the job's summary (its own counts, not earlier runs').

Embedded (the default filesystem broker): this command starts the Celery worker itself.
Distributed (a real broker): it enqueues and waits for the external `celery worker -Q ...` processes.
The project is named after the first URL's host and port unless --project names it.
"""

import argparse
import contextlib
import json
import sys
import time

import kombu.exceptions
import redis.exceptions
from django import db
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from rich.console import Console
from rich.live import Live

from console import control
from console.jobs import job_begin, job_finish, job_pause, job_resume, jobs_tick
from console.management.commands._crawl_summary import crawl_summary, progress_table, report_lines, unfinished_text
from console.models import Job
from console.selectors import project_progress, project_work_owed, retrying_text, stage_backlog
from console.workers import stage_warnings
from crawl.frontier.assets import assets_publish_owed
from crawl.frontier.pages import pages_publish_owed
from crawl.frontier.reaper import reap
from crawl.frontier.stages import job_scope
from crawl.models import Page, Project
from crawl.services.projects import (
    project_get_or_create,
    project_name_for,
    project_named_alike,
    seed_problem,
    seeds_add,
    seeds_retry_failed,
)
from crawl.workers import EmbeddedWorker
from scrape.sinks.delivery import sinks_owed, sinks_tick

POLL_SECONDS = 0.5  # how soon the end of the crawl is noticed (a cheap check: project_work_owed)
COUNT_EVERY_SECONDS = 2.0  # the full counts by state (progress display, stall detection), at least this apart
REAP_EVERY_SECONDS = 5.0
OUTAGE_WAIT_SECONDS = 2.0


def stall_seconds() -> float:
    """No change in the rows for this long, with work owed, means a stuck embedded worker: longer
    than a lease plus a republish, so the reaper has had its chance to move the work."""
    return 2 * settings.CRAWL_LEASE_SECONDS + settings.CRAWL_REPUBLISH_SECONDS


OUTAGES = (db.Error, kombu.exceptions.OperationalError, redis.exceptions.ConnectionError)


def _bounded(low: int, high: int | None = None):
    """An argparse type: an integer from low to high, else a clear error (a CommandError when the
    command is called from code, a usage line and exit 2 from a shell)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{value} is out of range ({low} to {high or 'any'})")
        return value

    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value < 0:
        raise argparse.ArgumentTypeError("seconds cannot be negative")
    return value


def _suggested(text: str) -> str:
    """What the user probably meant: "example.com" is https://example.com/."""
    bare = text.strip()
    if "://" not in bare and " " not in bare and "." in bare and project_name_for(f"https://{bare}"):
        return f"https://{bare}" + ("" if "/" in bare else "/")
    return "https://example.com/"


class Command(BaseCommand):
    help = "Crawl from the given URLs until every reachable in-scope page is done, then print a summary."

    def add_arguments(self, parser):
        parser.add_argument("urls", nargs="*", metavar="URL", help="start pages")
        parser.add_argument(
            "--sitemap",
            action="append",
            default=[],
            metavar="URL",
            help="a sitemap or sitemap index (.xml or .xml.gz) to seed from; repeatable",
        )
        parser.add_argument(
            "--feed", action="append", default=[], metavar="URL", help="an RSS or Atom feed to seed from; repeatable"
        )
        parser.add_argument("--project", help="project name (default: the first URL's host and port)")
        parser.add_argument("--max-depth", type=_bounded(0), help="follow links at most N hops from a seed")
        parser.add_argument("--max-pages", type=_bounded(1), help="stop discovering after N URLs")
        parser.add_argument("--allow-private", action="store_true", help="allow loopback and private addresses")
        parser.add_argument("--json", action="store_true", help="print the summary as one JSON line last")
        parser.add_argument(
            "--concurrency",
            type=_bounded(1, 1000),
            help="requests in flight at once within one fetch batch (project setting)",
        )
        parser.add_argument(
            "--max-per-host",
            type=_bounded(1, 1000),
            help="requests in flight at once to one host, all workers (project setting)",
        )
        parser.add_argument(
            "--no-media", action="store_true", help="record media links but download nothing (project setting)"
        )
        parser.add_argument(
            "--workers",
            type=_bounded(0, 64),
            default=None,
            help="worker processes to start (default: 2 with the embedded broker, 0 otherwise)",
        )
        parser.add_argument("--timeout", type=_seconds, default=0, help="give up after N seconds (0: never)")
        parser.add_argument(
            "--recrawl",
            action="store_true",
            help="fetch the project's finished pages again (conditional GET: an unchanged page costs a 304)",
        )

    def handle(self, *args, **opts):
        started, self._warned = time.monotonic(), []
        every_url = opts["urls"] + opts["sitemap"] + opts["feed"]
        if not every_url:
            raise CommandError("give at least one URL, --sitemap or --feed")
        if not any(project_name_for(url) for url in every_url):  # not one URL: nothing is created
            raise CommandError(f"not a URL that can be crawled: {every_url[0]!r} (try {_suggested(every_url[0])})")
        name = opts["project"] or project_name_for(every_url[0])
        if name is None:
            raise CommandError(f"not a URL that can be crawled: {every_url[0]!r} (try {_suggested(every_url[0])})")
        project = self._project(name, opts)
        self._check_seeds(project, every_url)
        job = self._job(project, opts)
        with job_scope(job.id):
            control.project_activate(project=project)
            # Refused seeds are kept too: each becomes a failed row saying why (and the job fails when
            # nothing else could be crawled).
            new_ids = seeds_add(project=project, urls=opts["urls"])
            new_ids += seeds_add(project=project, urls=opts["sitemap"], kind="sitemap")
            new_ids += seeds_add(project=project, urls=opts["feed"], kind="feed")
            new_ids += seeds_retry_failed(project=project, urls=every_url)
            # Work left over from an interrupted run is published now, not after the republish timeout.
            pages_publish_owed(Page.objects.filter(project=project).exclude(id__in=new_ids))
            assets_publish_owed(project.assets.all())
            if opts["recrawl"]:
                control.pages_recrawl(project=project)
        worker, interrupted = self._start_worker(opts["workers"]), False
        try:
            try:
                completed = self._wait(project, worker, opts, started)
            except KeyboardInterrupt:
                completed, interrupted = False, True
            if completed:
                job_finish(job=job)
            elif worker:
                job_pause(job=job)  # no worker is left to run it: it is paused, not "running"
            job.refresh_from_db()
            summary = crawl_summary(project, job, completed)
        finally:
            if worker:
                if completed:
                    with contextlib.suppress(*OUTAGES):
                        worker.drain()
                worker.stop()
        self._report(summary, opts["json"])
        if not completed:
            raise CommandError(unfinished_text(job, project, "interrupted" if interrupted else "timed out", worker))
        if job.state == Job.State.FAILED:
            hint = " (--allow-private allows loopback and private addresses)" if self._private_refused(summary) else ""
            raise CommandError(f"nothing could be crawled: job {job.id} failed, {job.message}{hint}")

    def _job(self, project: Project, opts) -> Job:
        """The project's job: a new one, the one running, or its paused one, resumed."""
        job, created = job_begin(project=project, kind=self._kind(opts), trigger=Job.Trigger.COMMAND)
        if job.state == Job.State.PAUSED:
            job_resume(job=job)
            self.stderr.write(f"resumed the paused job {job.id} of project {project.slug}")
        else:
            self.stderr.write(f"{'job' if created else 'joined the running job'} {job.id} of project {project.slug}")
        return job

    def _kind(self, opts) -> str:
        return Job.Kind.RECRAWL if opts["recrawl"] else Job.Kind.CRAWL

    def _project(self, name: str, opts) -> Project:
        existing = project_named_alike(name)
        if existing is not None:
            pages = Page.objects.filter(project=existing).count()
            alike = f", named {existing.name!r}" if existing.name != name else ""
            self.stderr.write(f"using the existing project {existing.slug} ({pages} pages from earlier runs{alike})")
            if opts["allow_private"] and not existing.allow_private:
                self.stderr.write(f"project {existing.slug}: private addresses allowed from now on (--allow-private)")
            elif existing.allow_private and not opts["allow_private"]:
                self.stderr.write(f"project {existing.slug} allows private addresses (set earlier)")
        return project_get_or_create(
            name=name,
            max_depth=opts["max_depth"],
            max_pages=opts["max_pages"],
            allow_private=True if opts["allow_private"] else None,
            download_media=False if opts["no_media"] else None,
            concurrency=opts["concurrency"],
            max_per_host=opts["max_per_host"],
        )

    def _private_refused(self, summary: dict) -> bool:
        return bool(summary["errors"].get("blocked_address")) and not summary.get("allow_private")

    def _check_seeds(self, project: Project, urls: list[str]) -> None:
        """Name each seed that will be refused, with the reason (and the flag that would allow it)."""
        for url in urls:
            problem = seed_problem(url, allow_private=project.allow_private)
            if problem is None:
                continue
            problem = problem.replace("(a project may allow private networks)", "(--allow-private allows it)")
            self.stderr.write(f"refused seed {url}: {problem}")

    def _start_worker(self, workers: int | None) -> EmbeddedWorker | None:
        count = workers if workers is not None else (2 if settings.CELERY_EMBEDDED_BROKER else 0)
        if count <= 0:
            return None
        worker = EmbeddedWorker(concurrency=count)
        worker.start()
        return worker

    def _wait(self, project, worker, opts, started) -> bool:
        if sys.stderr.isatty():
            with Live(console=Console(stderr=True), refresh_per_second=4, transient=False) as live:
                show = lambda p, t: live.update(progress_table(p, t))  # noqa: E731
                return self._poll(project, worker, opts, started, show, every=POLL_SECONDS)
        return self._poll(project, worker, opts, started, self._progress_line, every=10 if opts["json"] else 2)

    def _poll(self, project, worker, opts, started, show, every: float) -> bool:
        last_reap, last_line = float("-inf"), time.monotonic()  # reap at once: work of an interrupted run
        seen, last_change, last_count, progress = None, time.monotonic(), float("-inf"), None
        count_every = COUNT_EVERY_SECONDS
        while True:
            now = time.monotonic()
            if opts["timeout"] and now - started > opts["timeout"]:
                return False
            if worker:
                stalled = now - last_change > stall_seconds()
                worker.keep_alive(stalled=stalled)
                if stalled:
                    last_change = now  # the restarted worker gets its own time
            try:
                if now - last_reap >= REAP_EVERY_SECONDS:
                    reap(project_id=project.id)
                    jobs_tick()
                    sinks_tick()
                    last_reap = now
                if now - last_count >= count_every or not project_work_owed(project):
                    counting = time.monotonic()
                    progress, last_count = project_progress(project), time.monotonic()
                    # It counts every row of the project (0.2 s at 100,000 rows): at most ~1% of a core of
                    # the database; the end of the crawl is seen by the cheap probe in between.
                    count_every = max(COUNT_EVERY_SECONDS, 100 * (last_count - counting))
                    if progress != seen:
                        seen, last_change = progress, now
                    if worker is None:
                        self._warn_unworked(project)
                    if progress["pending"] == 0 and not sinks_owed(project.id, failing=False):
                        reap(project_id=project.id)  # a last sweep: stale temp files of killed downloads
                        return True
            except OUTAGES as exc:
                # The database or the broker is down (restarting, failing over): the work is in the
                # rows, so wait for them to come back instead of giving up on the crawl.
                self._outage(exc)
                time.sleep(OUTAGE_WAIT_SECONDS)
                continue
            if now - last_line >= every:
                show(progress, now - started)
                last_line = now
            time.sleep(POLL_SECONDS)

    def _warn_unworked(self, project: Project) -> None:
        """Distributed: say at once (and again when it changes) that owed work has no worker to take
        it, instead of waiting in silence for workers that are not there."""
        warnings = stage_warnings(stage_backlog(project), rendered=project.render_js)
        if warnings and warnings != self._warned:
            for warning in warnings:
                self.stderr.write(f"waiting: {warning}")
        self._warned = warnings

    def _outage(self, exc: Exception) -> None:
        with contextlib.suppress(db.Error):
            db.connection.close()  # the next query opens a fresh connection
        sys.stderr.write(f"waiting for the database or broker: {type(exc).__name__}: {str(exc).strip()[:200]}\n")
        sys.stderr.flush()

    def _progress_line(self, progress: dict, elapsed: float) -> None:
        pages = progress["pages"]
        states = " ".join(f"{k}={v}" for k, v in sorted(pages.items()))
        assets = " ".join(f"{k}={v}" for k, v in sorted(progress["assets"].items()))
        waiting = "".join(f" | {retrying_text(row)}" for row in progress["retrying"])
        sys.stderr.write(f"[{elapsed:6.1f}s] pages: {states or '-'} | assets: {assets or '-'}{waiting}\n")
        sys.stderr.flush()

    def _report(self, summary: dict, as_json: bool) -> None:
        for line in report_lines(summary):
            self.stdout.write(line)
        if as_json:
            self.stdout.write(json.dumps(summary))
