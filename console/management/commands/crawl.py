"""python manage.py crawl URL [URL ...]: crawl as a job until the project owes no more work, then
print the job's summary (its own counts, not earlier runs'). The run is console/runs/job_runs.py's, the
same as the Python API's crawlhub.run(): Ctrl-C and SIGTERM stop its embedded worker and pause the
job, and the next crawl resumes it.

Embedded (the default filesystem broker): this command starts the Celery worker itself.
Distributed (a real broker): it enqueues and waits for the external `celery worker -Q ...` processes.
The project is named after the first URL's host and port unless --project names it.
"""

import argparse
import functools
import json
import sys

from django.core.management.base import BaseCommand, CommandError
from rich.console import Console
from rich.live import Live

from console.management.commands._crawl_summary import (
    crawl_summary,
    finished_summary,
    progress_table,
    report_lines,
    unfinished_text,
)
from console.models import Job
from console.runs.job_runs import OUTAGES, POLL_SECONDS, Run, crawl_run, through_outages
from console.selectors import retrying_text
from crawl.models import Page, Project
from crawl.services.projects import project_get_or_create, project_name_for, project_named_alike


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
    # Django's system checks load every URLconf and admin (0.4 s of each run) and judge nothing a
    # crawl uses; `manage.py check`, runserver and migrate still run them.
    requires_system_checks = []

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
        every_url = opts["urls"] + opts["sitemap"] + opts["feed"]
        if not every_url:
            raise CommandError("give at least one URL, --sitemap or --feed")
        if not any(project_name_for(url) for url in every_url):  # not one URL: nothing is created
            raise CommandError(f"not a URL that can be crawled: {every_url[0]!r} (try {_suggested(every_url[0])})")
        name = opts["project"] or project_name_for(every_url[0])
        if name is None:
            raise CommandError(f"not a URL that can be crawled: {every_url[0]!r} (try {_suggested(every_url[0])})")
        # Refused seeds are named first (crawl_run), and kept too: each becomes a failed row saying
        # why (and the job fails when nothing else could be crawled).
        try:
            project = through_outages(lambda: self._project(name, opts), notice=self._notice)
            result = self._run(project, opts)
        except OUTAGES as exc:  # still down after the wait: one line, not a traceback
            said = " ".join(str(exc).split())[:300]
            raise CommandError(f"the database or broker did not come back: {type(exc).__name__}: {said}") from None
        if result.finished:  # no job made, as Start answers on a finished project
            finished = result.finished
            self._report(finished_summary(project, done=finished.done, failed=finished.failed), opts["json"])
            return
        job = result.job
        summary = crawl_summary(project, job, result.completed)
        self._report(summary, opts["json"])
        if not result.completed:
            why = "interrupted" if result.interrupted else "timed out"
            raise CommandError(unfinished_text(job, project, why, result.embedded))
        if job.state == Job.State.FAILED:
            hint = " (--allow-private allows loopback and private addresses)" if self._private_refused(summary) else ""
            raise CommandError(f"nothing could be crawled: job {job.id} failed, {job.message}{hint}")

    def _run(self, project: Project, opts) -> Run:
        """The job, run as crawlhub.run() runs it: progress on a live table on a terminal, else as lines."""
        run = functools.partial(
            crawl_run,
            project,
            seeds={"page": list(opts["urls"]), "sitemap": list(opts["sitemap"]), "feed": list(opts["feed"])},
            recrawl=opts["recrawl"],
            workers=opts["workers"],
            timeout=opts["timeout"],
            on_notice=self._notice,
            private_flag="--allow-private",
        )
        if sys.stderr.isatty():
            with Live(console=Console(stderr=True), refresh_per_second=4, transient=False) as live:
                return run(on_progress=lambda p, t: live.update(progress_table(p, t)), progress_every=POLL_SECONDS)
        return run(on_progress=self._progress_line, progress_every=10 if opts["json"] else 2)

    def _notice(self, text: str) -> None:
        self.stderr.write(text)
        self.stderr.flush()

    def _project(self, name: str, opts) -> Project:
        existing = project_named_alike(name)
        if existing is not None:
            pages = Page.objects.filter(project=existing).count()
            alike = f"; {name!r} names it too, but for case and punctuation" if existing.name != name else ""
            self.stderr.write(f"using the existing project {existing.name} ({pages} pages from earlier runs{alike})")
            if opts["allow_private"] and not existing.allow_private:
                self.stderr.write(f"project {existing.name}: private addresses allowed from now on (--allow-private)")
            elif existing.allow_private and not opts["allow_private"]:
                self.stderr.write(f"project {existing.name} allows private addresses (set earlier)")
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
