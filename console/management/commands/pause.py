"""python manage.py pause PROJECT: stop handing out a project's work (its job pauses); nothing is lost."""

from django.core.management.base import BaseCommand

from console.management.commands._project import project_arg
from console.runs import jobs, steering
from crawl.models import Page


class Command(BaseCommand):
    help = (
        "Pause a project and its current job: fetch workers stop claiming its pages (batches already claimed, "
        "and extraction of fetched pages, finish); queued pages stay queued and nothing is lost. `resume` "
        "starts it again."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug, name or id")

    def handle(self, *args, **opts):
        project = project_arg(opts["project"])
        job = jobs.job_current(project)
        changed = steering.project_pause(project=project)
        waiting = Page.objects.filter(project=project, state=Page.State.QUEUED).count()
        state = "paused" if changed else "already paused"
        which = f" (job {job.id})" if job else ""
        self.stdout.write(f"{project.slug}{which}: {state}; {waiting} queued pages wait for resume")
