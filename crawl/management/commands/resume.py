"""python manage.py resume PROJECT: make a paused project active again and republish its queued work."""

from django.core.management.base import BaseCommand

from crawl.management.commands._project import project_arg
from crawl.services.control import project_resume


class Command(BaseCommand):
    help = (
        "Resume a paused project: it becomes active and its queued pages, fetched pages and queued assets "
        "are published to the workers again. Harmless on an active project."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug, name or id")

    def handle(self, *args, **opts):
        project = project_arg(opts["project"])
        was = project.status
        published = project_resume(project=project)
        state = "resumed" if was != project.status else "already active"
        self.stdout.write(f"{project.slug}: {state}; {published} queued pages published")
