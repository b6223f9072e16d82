"""python manage.py recrawl PROJECT [--all|--due]: a job that fetches a project's pages again."""

from django.core.management.base import BaseCommand

from console.management.commands._project import project_arg
from console.models import Job
from console.runs import jobs
from crawl.frontier.recrawl import pages_dispatch


class Command(BaseCommand):
    help = (
        "Queue pages for fetching again, as a job: --due (default) the pages whose revisit time has come, hubs "
        "first; --all every finished page (conditional GET makes unchanged ones cheap). Workers do the fetching."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug, name or id")
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--all", action="store_true", help="every finished page")
        which.add_argument("--due", action="store_true", help="only pages whose revisit is due (the default)")

    def handle(self, *args, **opts):
        project = project_arg(opts["project"])
        if opts["all"]:
            job, count = jobs.crawl_recrawl(project=project, trigger=Job.Trigger.COMMAND)
            self.stdout.write(f"{project.slug}: job {job.id}, {count} pages queued for the fetch workers")
            return
        job, count = jobs.job_run(
            project=project,
            kind=Job.Kind.RECRAWL,
            trigger=Job.Trigger.COMMAND,
            action=lambda: len(pages_dispatch(project_id=project.id)),
        )
        self.stdout.write(f"{project.slug}: job {job.id}, {count} due pages queued")
