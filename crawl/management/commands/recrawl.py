"""python manage.py recrawl PROJECT [--all|--due]: queue a project's pages for fetching again."""

from django.core.management.base import BaseCommand

from crawl.frontier.schedule import pages_dispatch
from crawl.management.commands._project import project_arg
from crawl.services.control import pages_recrawl


class Command(BaseCommand):
    help = (
        "Queue pages for fetching again: --due (default) the pages whose revisit time has come, hubs first; "
        "--all every finished page (conditional GET makes unchanged ones cheap). Workers do the fetching."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug, name or id")
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--all", action="store_true", help="every finished page")
        which.add_argument("--due", action="store_true", help="only pages whose revisit is due (the default)")

    def handle(self, *args, **opts):
        project = project_arg(opts["project"])
        if opts["all"]:
            count = pages_recrawl(project=project)
            self.stdout.write(f"{project.slug}: {count} pages queued for the fetch workers")
            return
        queued = pages_dispatch(project_id=project.id)
        self.stdout.write(f"{project.slug}: {len(queued)} due pages queued")
