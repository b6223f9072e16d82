"""python manage.py resume PROJECT: make a paused project (and its job) active and republish its work."""

from django.core.management.base import BaseCommand

from console.management.commands._project import project_arg
from console.models import Job
from console.runs import jobs, steering


class Command(BaseCommand):
    help = (
        "Resume a paused project: it becomes active and its queued pages, fetched pages and queued assets "
        "are published to the workers again (its paused job runs again). Harmless on an active project."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug, name or id")

    def handle(self, *args, **opts):
        project = project_arg(opts["project"])
        job = jobs.job_current(project)
        resumed = steering.project_resume(project=project, trigger=Job.Trigger.COMMAND)
        if job is not None and job.state == Job.State.PAUSED:
            self.stdout.write(f"{project.slug}: job {job.id} resumed")
            return
        state = "resumed" if resumed.changed else "already active"
        self.stdout.write(f"{project.slug}: {state}; {resumed.published} queued pages published")
