"""Steering a crawl: start, pause, resume and cancel, done one way whichever door asks (the crawl
command and crawlhub.run(), the pause and resume commands, the admin, the dashboard's buttons, the
REST API). Each acts as a job of the project (console/runs/jobs.py keeps the books). Messages are
published after the writes commit; a publish lost anyway is redone by the reaper (the rows say what
is owed)."""

from typing import NamedTuple

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from console.models import Job
from console.runs.control import pages_recrawl, project_activate
from console.runs.jobs import job_begin, job_current, job_end, job_run, job_unpause
from console.selectors import project_work_owed
from core.canonical import InvalidURL, canonicalize, url_key
from crawl.frontier.assets import assets_publish_owed
from crawl.frontier.discovery import seeds_enqueue
from crawl.frontier.pages import pages_publish_owed
from crawl.frontier.stages import PAGE_PENDING_STATES, job_scope
from crawl.models import MediaAsset, Page, Project, Seed
from crawl.services.projects import seeds_add, seeds_retry_failed
from crawl.services.recrawl_schedules import schedule_sync
from scrape.hooks import spider_start

STEERS = ("pause", "resume", "cancel")  # what job_steer does to a running job


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


class Resumed(NamedTuple):
    """What a resume did: whether the project (or its job) was not running, and the queued pages
    it handed to the fetch workers."""

    changed: bool
    published: int


def crawl_start(
    *,
    project: Project,
    trigger: str,
    user=None,
    seeds: dict[str, list[str]] | None = None,
    recrawl: bool = False,
    refuse_finished: bool = True,
) -> tuple[Job, int]:
    """Start the project as a job (or join its running job, or resume its paused one): the project
    becomes active, `seeds` (URLs by kind: page, sitemap, feed) join its seeds, its active seeds go
    in the frontier (failed ones get another chance) with the requests of its spider's start() hook,
    and every owed page and asset is published;
    with `recrawl` its finished pages are fetched again too, as a recrawl job. Returns the job and
    the pages queued. Raises ProjectFinished when there is nothing to start, unless
    `refuse_finished` is False."""
    if refuse_finished:
        _refuse_finished(project, given=[url for urls in (seeds or {}).values() for url in urls])
    kind = Job.Kind.RECRAWL if recrawl else Job.Kind.CRAWL
    return job_run(
        project=project, kind=kind, trigger=trigger, user=user, action=lambda: _start(project, seeds or {}, recrawl)
    )


def _start(project: Project, seeds: dict[str, list[str]], recrawl: bool) -> int:
    project_activate(project=project)
    new_ids = [row for kind, urls in seeds.items() for row in seeds_add(project=project, urls=urls, kind=kind)]
    new_ids += seeds_enqueue(project)
    new_ids += spider_start(project=project)  # the spider's start() hook, if it has one
    given = [url for urls in seeds.values() for url in urls]
    new_ids += seeds_retry_failed(project=project, urls=_seed_urls(project) + given)
    # Work left over from an earlier run is published now, not after the republish timeout.
    published = len(new_ids) + pages_publish_owed(Page.objects.filter(project=project).exclude(id__in=new_ids))
    assets_publish_owed(MediaAsset.objects.filter(project=project))
    return published + (pages_recrawl(project=project) if recrawl else 0)


def _refuse_finished(project: Project, given: list[str] = ()) -> None:
    """Raise ProjectFinished when there is nothing to start: no job, no owed work, and every seed
    (those `given` now too) a page that is done, or failed other than as a seed to try again."""
    if job_current(project) is not None or project_work_owed(project.id):
        return
    pages = Page.objects.filter(project=project)
    keys = {_seed_key(url) for url in [*_seed_urls(project), *given]}
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


def project_pause(*, project: Project) -> bool:
    """Pause the project's job, or the project itself when it runs none. False if already paused."""
    job = job_current(project)
    return job_pause(job=job) if job else _pause(project)


def project_resume(*, project: Project, trigger: str = Job.Trigger.COMMAND, user=None) -> Resumed:
    """Resume the project's paused job, or the project itself when it has none: it becomes active
    and its queued work is published again, as a new crawl job when work is owed (every fetch
    belongs to a job). Harmless on an active project."""
    job = job_current(project)
    if job is not None and job.state == Job.State.PAUSED:
        return _job_resume(job)
    changed = project.status != Project.Status.ACTIVE
    if job is None and project_work_owed(project.id):
        _job, published = job_run(
            project=project, kind=Job.Kind.CRAWL, trigger=trigger, user=user, action=lambda: _republish(project)
        )
        return Resumed(changed=changed, published=published)
    return Resumed(changed=changed, published=_republish(project))


def seeds_add_as_job(
    *, project: Project, urls: list[str], kind: str = Seed.Kind.PAGE, trigger: str, user=None
) -> tuple[Job | None, list[int]]:
    """Add seeds (known ones are kept) whichever door asks (API, admin, command, Python API). On an
    active project their new rows are crawled as a job: the project's running one, else a new
    crawl job, which ends by itself once nothing is owed (every fetch belongs to a job). A paused
    or stopped project keeps them queued until Start or Resume, which run a job. Returns the job
    (None when none runs them) and the ids of the new frontier rows."""
    with transaction.atomic():
        status = Project.objects.select_for_update().values_list("status", flat=True).get(id=project.id)
        new_ids = seeds_add(project=project, urls=urls, kind=kind)  # published after the commit
        if status != Project.Status.ACTIVE or not new_ids:
            return job_current(project), new_ids
        job, _ = job_begin(project=project, kind=Job.Kind.CRAWL, trigger=trigger, user=user)  # or joins it
        return job, new_ids


def project_cancel(*, project: Project, user=None) -> bool:
    """Cancel the project's current job (see job_cancel). False when it runs none."""
    job = job_current(project)
    return job_cancel(job=job, user=user) if job else False


@transaction.atomic
def job_pause(*, job: Job) -> bool:
    """Stop handing out the job's work (batches already claimed finish; nothing is lost)."""
    if job.state not in (Job.State.QUEUED, Job.State.RUNNING):
        return False
    _pause(job.project)
    job.state, job.paused_at = Job.State.PAUSED, timezone.now()
    Job.objects.filter(id=job.id).update(state=job.state, paused_at=job.paused_at)
    return True


def job_resume(*, job: Job) -> bool:
    """Run the paused job again. False when it is not paused."""
    return _job_resume(job).changed


@transaction.atomic
def _job_resume(job: Job) -> Resumed:
    if job.state != Job.State.PAUSED:
        return Resumed(changed=False, published=0)
    with job_scope(job.id):
        published = _republish(job.project)
    job_unpause(job)
    return Resumed(changed=True, published=published)


@transaction.atomic
def job_cancel(*, job: Job, user=None) -> bool:
    """End the job now: the project is stopped, so no stage hands out its work any more (its queued
    pages are not fetched, its fetched pages not extracted, its assets not downloaded: they stay
    owed, and the message counts them); its messages still in the queues claim nothing. Batches
    already claimed finish, and a killed one's rows come back through the reaper. Its recrawl schedule
    keeps running (cancelling one run is not turning monitoring off: that is Pause): the next tick,
    or Start, is a new job that resumes exactly where this one stopped."""
    job = Job.objects.select_for_update().get(id=job.id)
    if not job.active:
        return False
    _stop(job.project)
    who = f" by {user}" if user is not None and getattr(user, "is_authenticated", False) else ""
    owed = Page.objects.filter(project=job.project, state__in=PAGE_PENDING_STATES).count()
    job_end(job=job, state=Job.State.CANCELLED, message=f"cancelled{who}; {owed} pages left owed, Start resumes them")
    return True


def job_actions(job: Job) -> list[str]:
    """What its state lets an operator do to the job: pause or resume, and cancel, while it runs."""
    if not job.active:
        return []
    return ["resume" if job.state == Job.State.PAUSED else "pause", "cancel"]


def job_steer(*, job: Job, action: str, user=None) -> bool:
    """Pause, resume or cancel the job (one of STEERS); False when its state does not allow it."""
    if action == "pause":
        return job_pause(job=job)
    if action == "resume":
        return job_resume(job=job)
    if action == "cancel":
        return job_cancel(job=job, user=user)
    raise ValueError(f"not a way to steer a job: {action!r}")


@transaction.atomic
def _pause(project: Project) -> bool:
    """Stop handing out the project's work (fetch, extract and download), and its recrawl schedule.
    Batches already claimed finish; queued and fetched rows wait (no message is lost: claims skip
    paused projects, and resume republishes). False if already paused."""
    rows = Project.objects.filter(id=project.id).exclude(status=Project.Status.PAUSED)
    changed = rows.update(status=Project.Status.PAUSED)
    project.status = Project.Status.PAUSED
    if changed:
        schedule_sync(project)
    return bool(changed)


@transaction.atomic
def _republish(project: Project) -> int:
    """Make the project active again and publish its queued pages and assets. Returns pages published."""
    Project.objects.filter(id=project.id).update(status=Project.Status.ACTIVE)
    project.status = Project.Status.ACTIVE
    schedule_sync(project)
    published = pages_publish_owed(Page.objects.filter(project=project))
    assets_publish_owed(MediaAsset.objects.filter(project=project))
    return published


def _stop(project: Project) -> bool:
    """Stop handing out the project's work (its job was cancelled) but keep its recrawl schedule: the
    next tick makes it active again. A paused project stays paused. False if it was not active."""
    changed = Project.objects.filter(id=project.id, status=Project.Status.ACTIVE).update(status=Project.Status.STOPPED)
    if changed:
        project.status = Project.Status.STOPPED
    return bool(changed)
