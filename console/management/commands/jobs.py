"""python manage.py jobs [PROJECT]: the run history (every job, newest first), and job actions."""

import json

from django.core.management.base import BaseCommand, CommandError

from console.management.commands._project import project_arg
from console.models import Job
from console.runs import jobs, steering


class Command(BaseCommand):
    help = "List jobs (newest first), optionally of one project or in one state; cancel one or retry its failures."

    def add_arguments(self, parser):
        parser.add_argument("project", nargs="?", help="project slug, name or id")
        parser.add_argument("--state", choices=Job.State.values, help="only jobs in this state")
        parser.add_argument("--limit", type=int, default=20, help="at most N jobs (default 20)")
        parser.add_argument("--json", action="store_true", help="one JSON object per job")
        parser.add_argument("--cancel", type=int, metavar="JOB", help="cancel this job (its work stays resumable)")
        parser.add_argument("--retry-failed", type=int, metavar="JOB", help="retry this job's failures as a new job")

    def handle(self, *args, **opts):
        if opts["cancel"] or opts["retry_failed"]:
            return self._act(opts)
        if opts["limit"] < 1:
            raise CommandError("--limit must be at least 1")
        found = Job.objects.select_related("project", "started_by")
        if opts["project"]:
            found = found.filter(project=project_arg(opts["project"]))
        if opts["state"]:
            found = found.filter(state=opts["state"])
        rows = list(found.order_by("-id")[: opts["limit"]])
        if not rows:
            self.stdout.write("no jobs")
        for job in rows:
            counts = jobs.job_counts(job)
            if opts["json"]:
                self.stdout.write(json.dumps(_as_json(job, counts)))
                continue
            ended = f"{job.finished_at:%Y-%m-%d %H:%M:%S}" if job.finished_at else "-"
            self.stdout.write(
                f"{job.id:6d}  {job.project.slug:24s} {job.kind:10s} {jobs.job_observed(job)[0]:10s} {job.trigger:8s} "
                f"{job.created_at:%Y-%m-%d %H:%M:%S} -> {ended}  {counts['pages_done']} done, "
                f"{counts['pages_failed']} failed, {counts['pages_per_second']:.1f}/s  {job.message}"
            )

    def _act(self, opts):
        job_id = opts["cancel"] or opts["retry_failed"]
        job = Job.objects.filter(id=job_id).select_related("project").first()
        if job is None:
            raise CommandError(f"no job {job_id}")
        if opts["cancel"]:
            if not steering.job_cancel(job=job):
                raise CommandError(f"job {job.id} has already ended ({job.state})")
            self.stdout.write(f"job {job.id} cancelled; `crawl` or Start resumes its project's work")
            return
        new, queued = jobs.job_retry_failed(job=job, trigger=Job.Trigger.COMMAND)
        self.stdout.write(f"job {new.id}: {queued} failed rows of job {job.id} queued again")


def _as_json(job: Job, counts: dict) -> dict:
    state, started_at = jobs.job_observed(job)
    return {
        "id": job.id,
        "project": job.project.slug,
        "kind": job.kind,
        "state": state,
        "trigger": job.trigger,
        "started_by": str(job.started_by) if job.started_by else None,
        "created_at": job.created_at.isoformat(),
        "started_at": started_at.isoformat() if started_at else None,
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
        "message": job.message,
        "counts": counts,
    }
