"""python manage.py pause PROJECT: stop handing out a project's work; its frontier is kept."""

from django.core.management.base import BaseCommand

from crawl.management.commands._project import project_arg
from crawl.models import Page
from crawl.services.control import project_pause


class Command(BaseCommand):
    help = (
        "Pause a project: fetch workers stop claiming its pages (batches already claimed, and extraction of "
        "fetched pages, finish); queued pages stay queued and nothing is lost. `resume` starts it again."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug, name or id")

    def handle(self, *args, **opts):
        project = project_arg(opts["project"])
        changed = project_pause(project=project)
        waiting = Page.objects.filter(project=project, state=Page.State.QUEUED).count()
        state = "paused" if changed else "already paused"
        self.stdout.write(f"{project.slug}: {state}; {waiting} queued pages wait for resume")
