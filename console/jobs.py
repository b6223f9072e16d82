"""Jobs: every run of a project is one, begun by the admin, the API, a command or a schedule tick.

A project runs at most one job at a time (Project.job_id). Its pages and assets are stamped with
that id when a stage claims them, so a job's counts are its rows, read live while it runs and kept
in `stats` when it ends. `jobs_tick` (beat, every few seconds; the crawl command calls it too)
starts the jobs whose first row was claimed and ends those whose project owes no more work.
"""

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from console import control
from console.jobreads import (  # noqa: F401 - the reads of a job, used through this module too
    job_claimed_any,
    job_counts,
    job_failures,
    job_has_failures,
    job_observed,
    job_span,
)
from console.models import Job
from core.canonical import InvalidURL, canonicalize, url_key
from crawl.frontier.recrawl import pages_dispatch
from crawl.frontier.stages import ASSET_PENDING_STATES, PAGE_PENDING_STATES, job_scope
from crawl.models import MediaAsset, Page, Project
from crawl.services.projects import seeds_retry_failed

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
    job = Job.objects.create(project=project, kind=kind, trigger=trigger, started_by=user, retry_of=retry_of)
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
            Job.objects.filter(id=job.id).update(state=Job.State.RUNNING)
            job.state = Job.State.RUNNING
    return job, queued


class ProjectFinished(Exception):
    """Start on a project with nothing left to crawl: no job is made (a "succeeded 0 / 0" one would
    hide the real last run); the message offers what the user likely means, a recrawl."""

    OFFER = ("recrawl_due", "recrawl")

    def __init__(self, project: Project, *, done: int, failed: int, due: int):
        self.project, self.done, self.failed, self.due = project, done, failed, due
        super().__init__(
            f"{project.name} has nothing left to crawl ({done} pages done, {failed} failed): "
            f"recrawl what is due ({due} pages) or recrawl everything ({done} pages)."
        )


def crawl_start(*, project: Project, trigger: str, user=None) -> tuple[Job, int]:
    """Start (or resume) the project as a job: its seeds (failed ones get another chance) and every
    owed row are published. Raises ProjectFinished when there is nothing to start."""
    _refuse_finished(project)

    def action():
        published = control.project_start(project=project)
        return published + len(seeds_retry_failed(project=project, urls=_seed_urls(project)))

    return _run(project, Job.Kind.CRAWL, trigger, user, action)


def crawl_recrawl_due(*, project: Project, trigger: str, user=None) -> tuple[Job, int]:
    """Fetch again the project's pages whose revisit is due (what the schedule would), as a job."""

    def action():
        control.project_activate(project=project)
        return len(pages_dispatch(project_id=project.id))

    return _run(project, Job.Kind.RECRAWL, trigger, user, action)


def _refuse_finished(project: Project) -> None:
    if job_current(project) is not None or _owes_work(project.id):
        return
    pages = Page.objects.filter(project=project)
    keys = {_seed_key(url) for url in _seed_urls(project)}
    if pages.filter(url_key__in=keys).exclude(state=Page.State.FAILED, is_seed=True).count() < len(keys):
        return  # a new seed, or a failed one to try again: there is something to start
    counts = dict(pages.values_list("state").annotate(n=Count("id")).order_by())
    if not counts:
        return  # never crawled: not finished
    due = pages.filter(state=Page.State.DONE, next_fetch_at__lte=timezone.now()).count()
    raise ProjectFinished(project, done=counts.get("done", 0), failed=counts.get("failed", 0), due=due)


def _seed_urls(project: Project) -> list[str]:
    return list(project.seeds.filter(active=True).values_list("url", flat=True))


def _seed_key(url: str) -> str:
    try:
        return url_key(canonicalize(url))
    except InvalidURL:
        return url_key(url)  # its failed row is keyed by the URL as given


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


def project_pause(*, project: Project) -> bool:
    """Pause the project's job, or the project itself when it runs none."""
    job = job_current(project)
    return job_pause(job=job) if job else control.project_pause(project=project)


def project_resume(*, project: Project) -> bool:
    """Resume the project's paused job, or the project itself when it has none."""
    job = job_current(project)
    if job is not None and job.state == Job.State.PAUSED:
        return job_resume(job=job)
    was = project.status
    control.project_resume(project=project)
    return was != Project.Status.ACTIVE


@transaction.atomic
def job_pause(*, job: Job) -> bool:
    """Stop handing out the job's work (batches already claimed finish; nothing is lost)."""
    if job.state not in (Job.State.QUEUED, Job.State.RUNNING):
        return False
    control.project_pause(project=job.project)
    Job.objects.filter(id=job.id).update(state=Job.State.PAUSED)
    job.state = Job.State.PAUSED
    return True


@transaction.atomic
def job_resume(*, job: Job) -> bool:
    if job.state != Job.State.PAUSED:
        return False
    with job_scope(job.id):
        control.project_resume(project=job.project)
    state = Job.State.RUNNING if job.started_at else Job.State.QUEUED
    Job.objects.filter(id=job.id).update(state=state)
    job.state = state
    return True


@transaction.atomic
def job_cancel(*, job: Job, user=None) -> bool:
    """End the job now: the project is stopped, so its messages still in the queues claim nothing
    (they are dropped when a worker takes them) and its queued rows stay queued; batches already
    claimed finish, and a killed one's rows come back through the reaper. Its recrawl schedule
    keeps running (cancelling one run is not turning monitoring off: that is Pause): the next tick,
    or Start, is a new job that resumes exactly where this one stopped."""
    job = Job.objects.select_for_update().get(id=job.id)
    if not job.active:
        return False
    control.project_stop(project=job.project)
    who = f" by {user}" if user is not None and getattr(user, "is_authenticated", False) else ""
    owed = Page.objects.filter(project=job.project, state__in=PAGE_PENDING_STATES).count()
    _end(job, Job.State.CANCELLED, f"cancelled{who}; {owed} pages left owed, Start resumes them")
    return True


def _end(job: Job, state: str, message: str, *, finished_at=None) -> None:
    job.finished_at = finished_at or timezone.now()
    job.stats = job_counts(job)
    job.state, job.message = state, message
    job.save(update_fields=["stats", "state", "started_at", "finished_at", "message"])
    Project.objects.filter(id=job.project_id, job_id=job.id).update(job_id=None)


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
        if job.project.status == Project.Status.ACTIVE and not _owes_work(job.project_id):
            ended += job_finish(job=job)
    return {"started": started, "ended": ended}


def job_finish(*, job: Job) -> bool:
    """End the job if its project owes no more work. True if it ended now."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(id=job.id)
        if job.state not in (Job.State.QUEUED, Job.State.RUNNING) or _owes_work(job.project_id):
            return False
        state, message = _verdict(job_counts(job))
        began, last = job_span(job)
        known = [t for t in (began, job.started_at) if t is not None]
        job.started_at = min(known) if known else job.created_at  # nothing claimed: it ends as it begins
        _end(job, state, message, finished_at=last)
    return True


# Pages refused by the site's own wish, not failures of the crawl: they never make a job "failed".
REFUSED_BY_SITE = ("robots_disallowed",)


def _verdict(counts: dict) -> tuple[str, str]:
    """An ended job's state and message: failed when every page it processed failed (pages robots.txt
    forbids aside), succeeded otherwise."""
    done, failed = counts["pages_done"], counts["pages_failed"]
    refused = sum(counts["errors"].get(code, 0) for code in REFUSED_BY_SITE)
    if failed - refused and not done:
        return Job.State.FAILED, f"every page failed ({failed}); see the failures in its report"
    if not done and not failed:
        return Job.State.SUCCEEDED, "nothing was owed"
    forbidden = f" ({refused} forbidden by robots.txt)" if refused else ""
    return Job.State.SUCCEEDED, f"{done} pages done, {failed} failed{forbidden}"


def job_actions(job: Job) -> list[str]:
    """What its state lets an operator do to the job: pause or resume, and cancel, while it runs."""
    if not job.active:
        return []
    return ["resume" if job.state == Job.State.PAUSED else "pause", "cancel"]


STEERS = ("pause", "resume", "cancel")


def job_steer(*, job: Job, action: str, user=None) -> bool:
    """Pause, resume or cancel the job (one of STEERS); False when its state does not allow it."""
    if action == "pause":
        return job_pause(job=job)
    if action == "resume":
        return job_resume(job=job)
    if action == "cancel":
        return job_cancel(job=job, user=user)
    raise ValueError(f"not a way to steer a job: {action!r}")


def _owes_work(project_id: int) -> bool:
    pages = Page.objects.filter(project_id=project_id, state__in=PAGE_PENDING_STATES)
    assets = MediaAsset.objects.filter(project_id=project_id, state__in=ASSET_PENDING_STATES)
    return pages.exists() or assets.exists()
