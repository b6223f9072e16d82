"""The console's writes on the frontier: activate a project, retry failed work, requeue, recrawl,
block hosts (start, pause, resume and cancel are console/runs/steering.py).

One set of writes shared by the admin actions, the REST API and the management commands, so the
three always do the same thing. Every function publishes only after its writes commit; a publish
that is lost anyway is redone by the reaper (the rows say what is owed).
"""

from django.db import transaction
from django.db.models import QuerySet

from crawl.frontier.assets import assets_retry as _assets_retry
from crawl.frontier.pages import pages_publish_owed
from crawl.frontier.pages import pages_requeue as _pages_requeue
from crawl.models import Host, Page, Project


def project_activate(*, project: Project) -> None:
    """Make the project active (its claims and its schedule run again); publishes nothing. The row
    decides, not the object given (it may be stale)."""
    changed = Project.objects.filter(id=project.id).exclude(status=Project.Status.ACTIVE)
    project.status = Project.Status.ACTIVE
    if changed.update(status=Project.Status.ACTIVE):
        _sync_schedule(project)


@transaction.atomic
def pages_retry(*, pages: QuerySet) -> int:
    """Give failed pages (of any project) a fresh set of attempts and queue them now (PyScraperX's
    restart of failed jobs). Rows that are not failed are left alone. Returns pages requeued."""
    return len(_pages_requeue(pages, from_states=(Page.State.FAILED,)))


def project_retry_failed(*, project: Project, error_code: str | None = None) -> int:
    """Retry every failed page of the project (optionally only those with one error code)."""
    pages = Page.objects.filter(project=project)
    if error_code:
        pages = pages.filter(error_code=error_code)
    return pages_retry(pages=pages)


@transaction.atomic
def assets_retry(*, assets: QuerySet) -> int:
    """Queue failed media assets again with fresh attempts. Returns assets requeued."""
    return _assets_retry(assets)


@transaction.atomic
def pages_requeue(*, pages: QuerySet) -> int:
    """Fetch the given finished or failed pages again now (conditional GET where validators are
    stored). Pending rows are left alone: they are already owed. Returns pages requeued."""
    return len(_pages_requeue(pages, from_states=(Page.State.DONE, Page.State.FAILED)))


def host_block(*, host: str, reason: str = "") -> None:
    """Never fetch this host again (any project) until unblocked: its pages fail as host_blocked."""
    Host.objects.update_or_create(host=host, defaults={"blocked": True, "blocked_reason": reason[:200]})


@transaction.atomic
def host_unblock(*, host: str) -> int:
    """Allow the host again: its host_blocked failures get fresh attempts, and its queued pages
    (of active projects) are published. Returns pages published."""
    Host.objects.filter(host=host).update(blocked=False, blocked_reason="")
    pages = Page.objects.filter(host=host, project__status=Project.Status.ACTIVE)
    retried = _pages_requeue(pages.filter(error_code="host_blocked"), from_states=(Page.State.FAILED,))
    return len(retried) + pages_publish_owed(pages.exclude(id__in=retried))


def _sync_schedule(project: Project) -> None:
    from crawl.services.recrawl_schedules import schedule_sync

    schedule_sync(project)


@transaction.atomic
def pages_recrawl(*, project: Project, states=(Page.State.DONE,)) -> int:
    """Queue the project's finished pages again, now; the fetch stage sends their validators (ETag,
    Last-Modified), so an unchanged page costs a 304 and stores nothing. Returns pages queued."""
    return len(_pages_requeue(Page.objects.filter(project=project), from_states=tuple(states)))
