"""Every run announces its end: when a job ends (succeeded, failed, cancelled), its summary (pages,
items, assets, errors by code, duration and a link) goes to the project's notification targets
as an Apprise message, and to its webhook sinks as a signed `job_ended` event. Per project
(`Project.notify_job_end`): off, failures only (the default) or every end. Sent once: the job's
`end_notified_at` is claimed by a conditional UPDATE before anything is sent."""

import logging

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from console.health.notify import deliver, duration_text
from console.models import Job
from crawl.models import Project
from crawlproject.control_tasks import JOB_ENDED
from sinks.delivery import sinks_offer
from sinks.models import Sink

log = logging.getLogger("crawlhub.notify")
ENDED = (Job.State.SUCCEEDED, Job.State.FAILED, Job.State.CANCELLED)


def job_end_announce_later(job_id: int) -> None:
    """After the current transaction commits, ask a worker (the control queue) to announce the end."""
    transaction.on_commit(lambda: current_app.send_task(JOB_ENDED.name, args=[job_id], queue=JOB_ENDED.queue))


def job_wanted(job: Job) -> bool:
    """Whether the job's project wants to hear of this end."""
    wanted = job.project.notify_job_end
    if wanted == Project.JobEndNotice.ALL:
        return job.state in ENDED
    return wanted == Project.JobEndNotice.FAILURES and job.state == Job.State.FAILED


def job_end_announce(*, job_id: int) -> bool:
    """Announce one ended job's end, once, if its project wants it. True if sent now."""
    job = Job.objects.select_related("project").filter(id=job_id, state__in=ENDED).first()
    if job is None or not job_wanted(job):
        return False
    if not Job.objects.filter(id=job.id, end_notified_at=None).update(end_notified_at=timezone.now()):
        return False
    summary = job_summary(job)
    title, body = job_end_text(job, summary)
    failed = job.state == Job.State.FAILED
    deliver(project=job.project, title=title, body=body, kind="failure" if failed else "success", urgent=failed)
    _webhook_event(job, summary)
    return True


def job_url(job: Job) -> str:
    return f"{settings.CONSOLE_BASE_URL.rstrip('/')}/admin/console/job/{job.id}/change/"


def job_summary(job: Job) -> dict:
    """The figures a job-ended message carries, from the counts kept when it ended."""
    stats = job.stats or {}
    begun, ended = job.started_at or job.created_at, job.finished_at or timezone.now()
    return {
        "job": job.id,
        "project": job.project.slug,
        "kind": job.kind,
        "state": job.state,
        "message": job.message,
        "pages_done": stats.get("pages_done", 0),
        "pages_failed": stats.get("pages_failed", 0),
        "items": stats.get("items", 0),
        "assets_done": stats.get("assets_done", 0),
        "assets_failed": stats.get("assets_failed", 0),
        "errors_by_code": {**stats.get("errors", {})},
        "asset_errors_by_code": {**stats.get("asset_errors", {})},
        "seconds": round(max((ended - begun).total_seconds(), 0.0), 1),
        "started_at": begun.isoformat(),
        "finished_at": ended.isoformat(),
        "url": job_url(job),
    }


def job_end_text(job: Job, s: dict) -> tuple[str, str]:
    project = job.project
    title = f"[crawlhub] {project.name}: job {job.id} {job.state}"
    errors = ", ".join(f"{code} x{n}" for code, n in s["errors_by_code"].items()) or "none"
    lines = [
        f"{project.name}: {job.get_kind_display()} job {job.id} {job.state}: {job.message}",
        "",
        f"Pages: {s['pages_done']} done, {s['pages_failed']} failed",
        f"Items: {s['items']}",
        f"Assets: {s['assets_done']} stored, {s['assets_failed']} failed",
        f"Errors by code: {errors}",
        f"Duration: {duration_text(s['seconds'])} (from {job.started_at or job.created_at:%Y-%m-%d %H:%M:%S} UTC)",
        "",
        s["url"],
    ]
    return title, "\n".join(lines)


def _webhook_event(job: Job, summary: dict) -> None:
    """Offer the `job_ended` event to the project's active webhook (HTTP) sinks: signed and
    delivered like their records (sinks/webhooks.py), kept once by its key."""
    sinks = list(
        Sink.objects.filter(project_id=job.project_id, active=True, kind=Sink.Kind.HTTP).values(
            "id", "items", "pages", "assets"
        )
    )
    if not sinks:
        return
    record = {"key": f"job.{job.id}.ended", "type": "event", "event": "job_ended", **summary}
    with transaction.atomic():
        sinks_offer(job.project_id, [record], sinks=sinks)
