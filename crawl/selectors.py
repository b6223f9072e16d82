"""Reads used by commands, the dashboard, the metrics endpoint and the API."""

from django.conf import settings
from django.db.models import Count

from crawl.models import Page, Project
from crawl.querysets import PENDING_STATES
from media.models import MediaAsset


def project_progress(project: Project) -> dict:
    """Counts by state of pages and assets, and whether any work is still owed."""
    pages = dict(Page.objects.filter(project=project).values_list("state").annotate(n=Count("id")))
    assets = dict(MediaAsset.objects.filter(project=project).values_list("state").annotate(n=Count("id")))
    pending = sum(pages.get(s, 0) for s in PENDING_STATES) + assets.get("queued", 0) + assets.get("leased", 0)
    return {"pages": pages, "assets": assets, "pending": pending}


def project_work_owed(project: Project) -> bool:
    """Whether any page or asset of the project still has work owed: two index probes, cheap
    however large the frontier (project_progress counts every row)."""
    pages = Page.objects.filter(project=project, state__in=PENDING_STATES)
    assets = MediaAsset.objects.filter(project=project, state__in=("queued", "leased"))
    return pages.exists() or assets.exists()


def project_errors(project: Project) -> dict[str, int]:
    rows = Page.objects.filter(project=project, state=Page.State.FAILED).values_list("error_code")
    return dict(rows.annotate(n=Count("id")).order_by("-n"))


def stage_backlog(project: Project | None = None) -> dict[str, int]:
    """Work owed per stage, from the rows (the truth): pages waiting for fetch (queued), for
    extraction (fetched) and assets waiting for download (queued), optionally of one project."""
    pages = Page.objects.all() if project is None else Page.objects.filter(project=project)
    assets = MediaAsset.objects.all() if project is None else MediaAsset.objects.filter(project=project)
    by_state = dict(
        pages.filter(state__in=(Page.State.QUEUED, Page.State.LEASED, Page.State.FETCHED))
        .values_list("state")
        .annotate(n=Count("id"))
    )
    downloads = assets.filter(state__in=(MediaAsset.State.QUEUED, MediaAsset.State.LEASED)).count()
    return {
        "fetch": by_state.get(Page.State.QUEUED, 0) + by_state.get(Page.State.LEASED, 0),
        "extract": by_state.get(Page.State.FETCHED, 0),
        "download": downloads,
    }


def broker_queue_lengths() -> dict[str, int | None]:
    """Messages waiting in each stage queue of the broker (all projects). Redis answers with LLEN;
    other brokers (the embedded filesystem one) give None: the rows (stage_backlog) stay the truth."""
    from crawlproject.queues import STAGE_QUEUES

    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://")):
        return dict.fromkeys(STAGE_QUEUES)
    import redis

    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    try:
        with client.pipeline() as pipe:
            for name in STAGE_QUEUES:
                pipe.llen(name)
            return dict(zip(STAGE_QUEUES, pipe.execute(), strict=True))
    except redis.RedisError:
        return dict.fromkeys(STAGE_QUEUES)
    finally:
        client.close()
