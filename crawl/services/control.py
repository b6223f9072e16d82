"""Steering a crawl: start, pause, resume, retry failed work, requeue, block hosts.

One set of writes shared by the admin actions, the REST API and the management commands, so the
three always do the same thing. Every function publishes only after its writes commit; a publish
that is lost anyway is redone by the reaper (the rows say what is owed).
"""

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from crawl import pipeline
from crawl.db import chunked
from crawl.models import Host, Page, Project
from media.models import MediaAsset

from .frontier import seeds_enqueue

PUBLISH_CHUNK = 500


def _publish_queued(page_qs: QuerySet) -> int:
    """Publish fetch batches for the queued rows of page_qs (grouped by host), in chunks so a
    large frontier never builds one huge IN list."""
    queued = page_qs.filter(state=Page.State.QUEUED)
    rows = list(queued.values_list("id", "host"))
    queued.update(enqueued_at=timezone.now())
    for chunk in chunked(rows, PUBLISH_CHUNK):
        pipeline.on_commit(pipeline.publish_fetch, [r[0] for r in chunk], dict(chunk))
    return len(rows)


@transaction.atomic
def project_start(*, project: Project) -> int:
    """Make the project active, put its active seeds in the frontier and publish everything queued.
    Starting a running project is harmless (claims are compare-and-set). Returns pages published."""
    if project.status != Project.Status.ACTIVE:
        Project.objects.filter(id=project.id).update(status=Project.Status.ACTIVE)
        project.status = Project.Status.ACTIVE
        _sync_schedule(project)
    seeds_enqueue(project)
    return _publish_queued(Page.objects.filter(project=project))


@transaction.atomic
def project_pause(*, project: Project) -> bool:
    """Stop handing out the project's work. Batches already claimed finish; queued rows stay queued
    (no message is lost: claims skip paused projects, and resume republishes). False if already paused."""
    changed = Project.objects.filter(id=project.id, status=Project.Status.ACTIVE).update(status=Project.Status.PAUSED)
    project.status = Project.Status.PAUSED
    if changed:
        _sync_schedule(project)
    return bool(changed)


@transaction.atomic
def project_resume(*, project: Project) -> int:
    """Make a paused project active again and republish its queued work. Returns pages published."""
    Project.objects.filter(id=project.id).update(status=Project.Status.ACTIVE)
    project.status = Project.Status.ACTIVE
    _sync_schedule(project)
    published = _publish_queued(Page.objects.filter(project=project))
    fetched = list(Page.objects.filter(project=project, state=Page.State.FETCHED).values_list("id", flat=True))
    pipeline.on_commit(pipeline.publish_extract, fetched)
    assets = list(
        MediaAsset.objects.filter(project=project, state=MediaAsset.State.QUEUED).values_list("id", flat=True)
    )
    pipeline.on_commit(pipeline.publish_download, assets)
    return published


def _requeue_pages(ids: list[int], *, from_states: tuple[str, ...], **extra) -> int:
    """Queue the rows among ids still in from_states, now, and publish them; chunked."""
    now = timezone.now()
    requeued = 0
    for chunk in chunked(ids, PUBLISH_CHUNK):
        rows = Page.objects.filter(id__in=chunk, state__in=from_states)
        hosts = dict(rows.values_list("id", "host"))
        requeued += rows.update(
            state=Page.State.QUEUED,
            attempts=0,
            next_fetch_at=now,
            lease_token=None,
            lease_expires_at=None,
            enqueued_at=now,
            **extra,
        )
        pipeline.on_commit(pipeline.publish_fetch, list(hosts), hosts)
    return requeued


@transaction.atomic
def pages_retry(*, pages: QuerySet) -> int:
    """Give failed pages (of any project) a fresh set of attempts and queue them now (PyScraperX's
    restart of failed jobs). Rows that are not failed are left alone. Returns pages requeued."""
    ids = list(pages.filter(state=Page.State.FAILED).values_list("id", flat=True))
    return _requeue_pages(ids, from_states=(Page.State.FAILED,), error_code="", error_message="")


def project_retry_failed(*, project: Project, error_code: str | None = None) -> int:
    """Retry every failed page of the project (optionally only those with one error code)."""
    pages = Page.objects.filter(project=project)
    if error_code:
        pages = pages.filter(error_code=error_code)
    return pages_retry(pages=pages)


@transaction.atomic
def assets_retry(*, assets: QuerySet) -> int:
    """Queue failed media assets again with fresh attempts. Returns assets requeued."""
    ids = list(assets.filter(state=MediaAsset.State.FAILED).values_list("id", flat=True))
    now = timezone.now()
    for chunk in chunked(ids, PUBLISH_CHUNK):
        MediaAsset.objects.filter(id__in=chunk, state=MediaAsset.State.FAILED).update(
            state=MediaAsset.State.QUEUED,
            attempts=0,
            error_code="",
            error_message="",
            next_fetch_at=now,
            lease_token=None,
            lease_expires_at=None,
            enqueued_at=now,
        )
        pipeline.on_commit(pipeline.publish_download, chunk)
    return len(ids)


@transaction.atomic
def pages_requeue(*, pages: QuerySet) -> int:
    """Fetch the given finished or failed pages again now (conditional GET where validators are
    stored). Pending rows are left alone: they are already owed. Returns pages requeued."""
    states = (Page.State.DONE, Page.State.FAILED)
    ids = list(pages.filter(state__in=states).values_list("id", flat=True))
    return _requeue_pages(ids, from_states=states, error_code="", error_message="")


def host_block(*, host: str, reason: str = "") -> None:
    """Never fetch this host again (any project) until unblocked: its pages fail as host_blocked."""
    Host.objects.update_or_create(host=host, defaults={"blocked": True, "blocked_reason": reason[:200]})


@transaction.atomic
def host_unblock(*, host: str) -> int:
    """Allow the host again: its host_blocked failures get fresh attempts, and its queued pages
    (of active projects) are published. Returns pages published."""
    Host.objects.filter(host=host).update(blocked=False, blocked_reason="")
    pages = Page.objects.filter(host=host, project__status=Project.Status.ACTIVE)
    pages.filter(state=Page.State.FAILED, error_code="host_blocked").update(
        state=Page.State.QUEUED, attempts=0, error_code="", error_message="", next_fetch_at=timezone.now()
    )
    return _publish_queued(pages)


def _sync_schedule(project: Project) -> None:
    from .schedules import schedule_sync

    schedule_sync(project)
