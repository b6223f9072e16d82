"""Recrawl scheduling in the rows: the dispatcher queues done pages whose revisit is due, and a
change of a project's revisit settings reschedules the pages already waiting for theirs."""

from datetime import timedelta

from django.db.models import Case, F, IntegerField, Q, Value, When
from django.db.models.functions import Greatest, Least
from django.utils import timezone

from crawl.frontier.pages import DONE, pages_requeue
from crawl.models import Page, Project

HUB_KINDS = ("sitemap", "feed")
DISPATCH_LIMIT = 5000


def hub_filter() -> Q:
    """Start pages, sitemaps and feeds: where new pages appear, so they are revisited most often."""
    return Q(is_seed=True) | Q(kind__in=HUB_KINDS)


def pages_due(*, project_id: int | None = None, now=None):
    """The done pages whose revisit has come (of one active project, or of all)."""
    due = Page.objects.filter(state=Page.State.DONE, next_fetch_at__lte=now or timezone.now())
    if project_id is not None:
        due = due.filter(project_id=project_id, project__status=Project.Status.ACTIVE)
    return due


def pages_dispatch(*, project_id: int | None = None, limit: int = DISPATCH_LIMIT) -> list[int]:
    """Queue the done pages whose revisit is due (highest priority, then hubs, first) and publish
    them; returns exactly the ids this call queued, so two dispatchers at once (two beats by
    mistake) never queue a page twice."""
    now = timezone.now()
    due = pages_due(project_id=project_id, now=now)
    hubs_first = Case(When(hub_filter(), then=Value(0)), default=Value(1), output_field=IntegerField())
    order = ("-priority", hubs_first, "next_fetch_at", "id")
    ids = list(due.order_by(*order).values_list("id", flat=True)[:limit])
    return pages_requeue(Page.objects.filter(id__in=ids, next_fetch_at__lte=now), from_states=(DONE,), order=order)


def pages_recrawl_all(*, project_id: int) -> list[int]:
    """A "recrawl everything" tick: queue every done page of the project now (conditional GET keeps
    unchanged ones cheap) and publish them. Returns the ids queued."""
    pages = Page.objects.filter(project_id=project_id, project__status=Project.Status.ACTIVE)
    return pages_requeue(pages, from_states=(DONE,))


def tick_owes(*, project_id: int, mode: str) -> bool:
    """Whether a tick of the project's schedule has pages to queue: due ones, or (recrawl
    everything) any done one. The project's status aside: a tick wakes a stopped project."""
    pages = Page.objects.filter(project_id=project_id, state=Page.State.DONE)
    if mode == Project.RecrawlMode.DUE:
        pages = pages.filter(next_fetch_at__lte=timezone.now())
    return pages.exists()


def pages_reschedule(*, project: Project) -> int:
    """Bring the done pages' next revisits within the project's current settings: hubs no later than
    one hub interval after their last fetch, other pages' intervals clamped into [min, max].
    Returns rows changed."""
    done = Page.objects.filter(project=project, state=Page.State.DONE, fetched_at__isnull=False)
    hub = timedelta(seconds=project.hub_revisit_seconds)
    low, high = project.revisit_min_seconds, project.revisit_max_seconds
    changed = done.filter(hub_filter(), next_fetch_at__gt=F("fetched_at") + hub).update(
        next_fetch_at=F("fetched_at") + hub, revisit_seconds=project.hub_revisit_seconds
    )
    pages = done.exclude(hub_filter())
    changed += pages.filter(revisit_seconds__gt=high).update(
        revisit_seconds=high, next_fetch_at=Least(F("next_fetch_at"), F("fetched_at") + timedelta(seconds=high))
    )
    changed += pages.filter(revisit_seconds__lt=low).update(
        revisit_seconds=low, next_fetch_at=Greatest(F("next_fetch_at"), F("fetched_at") + timedelta(seconds=low))
    )
    return changed
