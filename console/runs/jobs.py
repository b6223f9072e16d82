"""Jobs: every run of a project is one, begun by the admin, the API, a command or a schedule tick
(start, pause, resume and cancel are console/runs/steering.py; the other runs, recrawl, re-extract and
retry, are here).

A project runs at most one job at a time (Project.job_id). Its pages and assets are stamped with
that id when a stage claims them, so a job's counts are its rows, read live while it runs and kept
in `stats` when it ends. `jobs_tick` (beat, every few seconds; the crawl command calls it too)
starts the jobs whose first row was claimed and ends those whose project owes no more work.
"""

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from console.models import Job
from console.runs import control
from console.runs.job_notices import job_end_announce_later
from console.runs.jobreads import (  # noqa: F401 - the reads of a job, used through this module too
    job_claimed_any,
    job_counts,
    job_failures,
    job_has_failures,
    job_observed,
    job_span,
)
from console.selectors import project_work_owed
from crawl.frontier.recrawl import pages_dispatch
from crawl.frontier.stages import job_scope
from crawl.models import MediaAsset, Page, Project

ACTIVE = Job.ACTIVE_STATES


def job_current(project: Project) -> Job | None:
    """The project's job that has not ended, if any."""
    if not project.job_id:
        return None
    return Job.objects.filter(id=project.job_id, state__in=ACTIVE).first()


@transaction.atomic
def job_begin(*, project: Project, kind: str, trigger: str, user=None, retry_of: Job | None = None) -> tuple[Job, bool]:
    """The project's running job if it has one (the action joins it), else a new queued job that
    becomes the project's. Returns (job, created)."""
    locked = Project.objects.select_for_update().get(id=project.id)
    current = job_current(locked)
    if current is not None:
        return current, False
    user = user if user is not None and getattr(user, "is_authenticated", False) else None
    job = Job.objects.create(
        project=project,
        kind=kind,
        trigger=trigger,
        started_by=user,
        retry_of=retry_of,
        spider_version_id=locked.spider_version_id,  # the code it runs; a deploy while it runs is logged
    )
    Project.objects.filter(id=project.id).update(job_id=job.id)
    project.job_id = job.id
    return job, True


def job_run(*, project: Project, kind: str, trigger: str, action, user=None, retry_of=None) -> tuple[Job, int]:
    """Run `action` (it queues rows and returns how many) as a job of the project; its messages
    carry the job."""
    return _run(project, kind, trigger, user, action, retry_of)


def _run(project: Project, kind: str, trigger: str, user, action, retry_of: Job | None = None) -> tuple[Job, int]:
    job, _ = job_begin(project=project, kind=kind, trigger=trigger, user=user, retry_of=retry_of)
    # The scope holds until after the commit: the action's messages are published then, with the job.
    with job_scope(job.id), transaction.atomic():
        queued = action()
        if job.state == Job.State.PAUSED and project.status == Project.Status.ACTIVE:
            job_unpause(job)  # as a resume does
    return job, queued


def job_unpause(job: Job) -> None:
    """A paused job runs again (running once it claimed a row, else queued); the pause's time is
    added to the time it spent paused, which its duration leaves out."""
    now = timezone.now()
    job.paused_seconds += (now - job.paused_at).total_seconds() if job.paused_at else 0.0
    job.state = Job.State.RUNNING if job.started_at else Job.State.QUEUED
    job.paused_at = None
    Job.objects.filter(id=job.id).update(state=job.state, paused_at=None, paused_seconds=job.paused_seconds)


def crawl_recrawl_due(*, project: Project, trigger: str, user=None) -> tuple[Job, int]:
    """Fetch again the project's pages whose revisit is due (what the schedule would), as a job."""

    def action():
        control.project_activate(project=project)
        return len(pages_dispatch(project_id=project.id))

    return _run(project, Job.Kind.RECRAWL, trigger, user, action)


def crawl_recrawl(*, project: Project, trigger: str, user=None) -> tuple[Job, int]:
    """Fetch the project's finished pages again (conditional GET) as a job."""

    def action():
        control.project_activate(project=project)
        return control.pages_recrawl(project=project)

    return _run(project, Job.Kind.RECRAWL, trigger, user, action)


def crawl_reextract(*, project: Project, trigger: str, user=None) -> tuple[Job, int]:
    """Extract the project's stored pages again (rules changed) as a job; nothing is refetched."""
    from scrape.services import pages_reextract

    def action():
        control.project_activate(project=project)
        return pages_reextract(project=project)

    return _run(project, Job.Kind.REEXTRACT, trigger, user, action)


def job_retry_failed(*, job: Job, trigger: str, user=None) -> tuple[Job, int]:
    """Retry the job's failed pages and assets as a new job (it joins the project's running job,
    if there is one). Returns the job and the rows queued."""
    project = job.project

    def action():
        control.project_activate(project=project)
        pages = control.pages_retry(pages=Page.objects.filter(job_id=job.id, state=Page.State.FAILED))
        assets = control.assets_retry(assets=MediaAsset.objects.filter(job_id=job.id, state=MediaAsset.State.FAILED))
        return pages + assets

    return _run(project, Job.Kind.RETRY, trigger, user, action, retry_of=job)


def crawl_retry_failed(*, project: Project, trigger: str, user=None, error_code: str | None = None) -> tuple[Job, int]:
    """Retry every failed page of the project (optionally of one error code) as a job."""

    def action():
        control.project_activate(project=project)
        return control.project_retry_failed(project=project, error_code=error_code)

    return _run(project, Job.Kind.RETRY, trigger, user, action)


def job_end(*, job: Job, state: str, message: str, finished_at=None) -> None:
    """Write the job's end: its state, message and kept counts; the project runs no job after it.
    Its end is announced after the commit (console/runs/job_notices.py)."""
    job.finished_at = finished_at or timezone.now()
    job.stats = job_counts(job)
    job.state, job.message = state, message
    job.save(update_fields=["stats", "state", "started_at", "finished_at", "message"])
    Project.objects.filter(id=job.project_id, job_id=job.id).update(job_id=None)
    job_end_announce_later(job.id)


def jobs_tick() -> dict[str, int]:
    """Start the queued jobs one of whose rows was claimed, and end the running ones whose project
    owes no more work: failed when every page it processed failed, succeeded otherwise."""
    started = ended = 0
    for job in Job.objects.filter(state__in=(Job.State.QUEUED, Job.State.RUNNING)).select_related("project"):
        if job.state == Job.State.QUEUED and job_claimed_any(job):
            began = job_span(job)[0] or timezone.now()
            started += Job.objects.filter(id=job.id, state=Job.State.QUEUED).update(
                state=Job.State.RUNNING, started_at=began
            )
        if job.project.status == Project.Status.ACTIVE and not project_work_owed(job.project_id):
            ended += job_finish(job=job)
    return {"started": started, "ended": ended}


def job_finish(*, job: Job) -> bool:
    """End the job if its project owes no more work. True if it ended now."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(id=job.id)
        if job.state not in (Job.State.QUEUED, Job.State.RUNNING) or project_work_owed(job.project_id):
            return False
        state, message = _verdict(job_counts(job), allow_private=job.project.allow_private)
        if (state, message) == (Job.State.SUCCEEDED, NOTHING_OWED):
            state, message = _seeds_verdict(job.project) or (state, message)
        began, last = job_span(job)
        known = [t for t in (began, job.started_at) if t is not None]
        job.started_at = min(known) if known else job.created_at  # nothing claimed: it ends as it begins
        job_end(job=job, state=state, message=message, finished_at=last)
    return True


# Pages refused by the site's own wish, not failures of the crawl: they never make a job "failed".
REFUSED_BY_SITE = ("robots_disallowed",)


NOTHING_OWED = "nothing was owed"
PRIVATE = "blocked_address"  # the code of a page refused for its loopback or private address


def _verdict(counts: dict, *, allow_private: bool = False) -> tuple[str, str]:
    """An ended job's state and message: failed when every page it processed failed (pages robots.txt
    forbids aside), succeeded otherwise."""
    done, failed = counts["pages_done"], counts["pages_failed"]
    refused = sum(counts["errors"].get(code, 0) for code in REFUSED_BY_SITE)
    if failed - refused and not done:
        why = _private_hint(counts["errors"].get(PRIVATE, 0), allow_private)
        return Job.State.FAILED, f"every page failed ({failed}){why}; see the failures in its report"
    if not done and not failed:
        return Job.State.SUCCEEDED, NOTHING_OWED
    forbidden = f" ({refused} forbidden by robots.txt)" if refused else ""
    return Job.State.SUCCEEDED, f"{done} pages done, {failed} failed{forbidden}"


def _private_hint(refused: int, allow_private: bool) -> str:
    if not refused or allow_private:
        return ""
    return f", {refused} refused as loopback or private addresses (the project's allow_private setting allows them)"


def _seeds_verdict(project: Project) -> tuple[str, str] | None:
    """A job that found nothing owed because its seeds failed before it began (a worker took them
    as they were added): failed, saying why, when the project has failed seeds and no done page."""
    pages = Page.objects.filter(project=project)
    if pages.filter(state=Page.State.DONE).exists():
        return None
    failed = _errors_by_code(pages.filter(is_seed=True, state=Page.State.FAILED))
    if not failed:
        return None
    codes = ", ".join(f"{n} {code}" for code, n in failed.items())
    why = _private_hint(failed.get(PRIVATE, 0), project.allow_private)
    return Job.State.FAILED, f"nothing could be crawled: every seed failed ({codes}){why}"


def _errors_by_code(rows) -> dict[str, int]:
    counted = rows.values_list("error_code").annotate(n=Count("id")).order_by()
    return {code or "error": n for code, n in counted}
