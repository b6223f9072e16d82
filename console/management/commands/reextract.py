"""python manage.py reextract PROJECT [--wait]: a job that extracts stored pages again, without refetching."""

import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from console.management.commands._progress import progress
from console.management.commands._project import project_arg
from console.models import Job
from console.runs import jobs
from crawl.frontier.reaper import reap
from crawl.models import Page, Project
from crawlproject.processes import EmbeddedWorker


class Command(BaseCommand):
    help = "Run the extract stage again over a project's stored pages (after changing its rules); no HTTP request."

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug, name or id")
        parser.add_argument("--wait", action="store_true", help="wait until every page is extracted again")
        parser.add_argument("--timeout", type=float, default=600, help="give up waiting after N seconds")

    def handle(self, *args, **opts):
        project = project_arg(opts["project"])
        job, queued = jobs.crawl_reextract(project=project, trigger=Job.Trigger.COMMAND)
        self.stdout.write(f"{project.slug}: job {job.id}, {queued} stored pages queued for extraction")
        if opts["wait"] and queued:
            self._wait(project, queued, opts["timeout"])
        if opts["wait"]:
            jobs.job_finish(job=job)
            job.refresh_from_db()
            self.stdout.write(f"job {job.id} {job.state}: {job.message}")

    def _wait(self, project: Project, queued: int, timeout: float) -> None:
        worker = EmbeddedWorker(concurrency=2) if settings.CELERY_EMBEDDED_BROKER else None
        if worker:
            worker.start()
        started = time.monotonic()
        try:
            with progress("re-extracting", queued) as advance:
                self._poll(project, queued, advance, started + timeout)
        finally:
            if worker:
                worker.stop()
        self.stdout.write(f"{project.slug}: re-extracted {queued} pages in {time.monotonic() - started:.1f} s")

    def _poll(self, project: Project, queued: int, advance, deadline: float) -> None:
        shown = 0
        while remaining := Page.objects.filter(project=project, state__in=["fetched", "extracted"]).count():
            if time.monotonic() > deadline:
                raise CommandError("re-extraction did not finish in time; it goes on in the workers")
            if queued - remaining > shown:
                advance(queued - remaining - shown)
                shown = queued - remaining
            reap(project_id=project.id)
            time.sleep(0.5)
