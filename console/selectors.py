"""Reads used by commands, the dashboard, the metrics endpoint and the API."""

from django.conf import settings
from django.db.models import Count, Max, Min, Q, QuerySet
from django.utils import timezone

from console.health.counters import counters_since
from crawl.frontier.stages import (
    ASSET_PENDING_STATES,
    DOWNLOAD,
    EXTRACT,
    FETCH,
    PAGE_PENDING_STATES,
    PAGE_STAGE_OF_STATE,
)
from crawl.models import HostBlock, MediaAsset, Page, Project


def project_progress(project: Project) -> dict:
    """Counts by state of pages and assets, whether any work is still owed, and how many done
    pages were stored without being parsed (not HTML: done, not failed)."""
    by_state = Page.objects.filter(project=project).values_list("state")
    rows = list(by_state.annotate(n=Count("id"), not_parsed=Count("id", filter=Q(parsed=False))))
    pages = {state: n for state, n, _ in rows}
    pages_not_parsed = next((unparsed for state, _, unparsed in rows if state == Page.State.DONE), 0)
    assets = dict(MediaAsset.objects.filter(project=project).values_list("state").annotate(n=Count("id")))
    pending = sum(pages.get(s, 0) for s in PAGE_PENDING_STATES) + sum(assets.get(s, 0) for s in ASSET_PENDING_STATES)
    return {
        "pages": pages,
        "assets": assets,
        "pending": pending,
        "pages_not_parsed": pages_not_parsed,
        "retrying": pages_retrying(project=project).get(project.id, []),
    }


def pages_retrying(*, project: Project | None = None) -> dict[int, list[dict]]:
    """Queued pages waiting out a back-off after an error (a retry, or a host's Retry-After), per
    project: for each error code, how many, one of their messages, and when the next is due. Only
    rows not yet due are read (the (state, next_fetch_at) index), so it stays cheap on a big frontier."""
    waiting = Page.objects.filter(state=Page.State.QUEUED, next_fetch_at__gt=timezone.now()).exclude(error_code="")
    if project is not None:
        waiting = waiting.filter(project=project)
    rows = waiting.values("project_id", "error_code").annotate(
        pages=Count("id"), next_at=Min("next_fetch_at"), message=Max("error_message")
    )
    found: dict[int, list[dict]] = {}
    for row in rows.order_by("project_id", "next_at"):
        found.setdefault(row.pop("project_id"), []).append(row | {"code": row.pop("error_code")})
    return found


def retrying_text(row: dict) -> str:
    """One line for a group of pages_retrying: "2 pages retrying connect_error, next at 12:04:10"."""
    at = timezone.localtime(row["next_at"]).strftime("%H:%M:%S")
    return f"{row['pages']} {'page' if row['pages'] == 1 else 'pages'} retrying {row['code']}, next at {at}"


def project_work_owed(project_id: int) -> bool:
    """Whether any page or asset of the project still has work owed: two index probes, cheap
    however large the frontier (project_progress counts every row)."""
    pages = Page.objects.filter(project_id=project_id, state__in=PAGE_PENDING_STATES)
    assets = MediaAsset.objects.filter(project_id=project_id, state__in=ASSET_PENDING_STATES)
    return pages.exists() or assets.exists()


ERROR_STATES = (Page.State.FAILED, Page.State.QUEUED, Page.State.LEASED)
NOT_AN_ERROR = ("slot_missed",)  # put back unsent (core.net.client.SLOT_MISSED): the host's delay, not the site


def pages_in_error(project: Project) -> QuerySet:
    """The project's pages that failed, and those whose last try failed and that wait to be tried
    again (queued or leased, their error kept): while a site is down its pages are retried, not failed."""
    rows = Page.objects.filter(project=project, state__in=ERROR_STATES).exclude(error_code="")
    return rows.exclude(error_code__in=NOT_AN_ERROR)


def errors_grouped(project: Project, column: str, *, top: int) -> list[tuple[str, int, int]]:
    """(error code or host, pages in error, of them retrying), the most first: failed and retrying alike."""
    retrying = Count("id", filter=~Q(state=Page.State.FAILED))
    rows = pages_in_error(project).values(column).annotate(n=Count("id"), retrying=retrying)
    return [(row[column], row["n"], row["retrying"]) for row in rows.order_by("-n", column)[:top]]


def project_errors(project: Project) -> dict[str, int]:
    rows = Page.objects.filter(project=project, state=Page.State.FAILED).values_list("error_code")
    return dict(rows.annotate(n=Count("id")).order_by("-n"))


def stage_backlog(project: Project | None = None, *, projects: QuerySet | None = None) -> dict[str, int]:
    """Work owed per stage, from the rows (the truth): pages waiting for fetch (queued), for
    extraction (fetched) and assets waiting for download (queued), optionally of one project or of
    `projects` (those a user sees)."""
    pages, assets = Page.objects.all(), MediaAsset.objects.all()
    if project is not None:
        pages, assets = pages.filter(project=project), assets.filter(project=project)
    if projects is not None:
        pages, assets = pages.filter(project__in=projects), assets.filter(project__in=projects)
    owed_states = [s for s, stage in PAGE_STAGE_OF_STATE.items() if stage != DOWNLOAD]
    by_state = dict(pages.filter(state__in=owed_states).values_list("state").annotate(n=Count("id")))
    backlog = dict.fromkeys((FETCH, EXTRACT, DOWNLOAD), 0)
    for state, n in by_state.items():
        backlog[PAGE_STAGE_OF_STATE[state]] += n
    backlog[DOWNLOAD] = assets.filter(state__in=ASSET_PENDING_STATES).count()
    return backlog


def broker_queue_lengths() -> dict[str, int | None]:
    """Messages waiting in each queue of the broker (all projects): the stages' and the control
    queue's (housekeeping; it grows when no worker consumes it). Redis answers with LLEN; other
    brokers (the embedded filesystem one) give None: the rows (stage_backlog) stay the truth."""
    from crawlproject.queues import QUEUES

    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://")):
        return dict.fromkeys(QUEUES)
    import redis

    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    try:
        with client.pipeline() as pipe:
            for name in QUEUES:
                pipe.llen(name)
            return dict(zip(QUEUES, pipe.execute(), strict=True))
    except redis.RedisError:
        return dict.fromkeys(QUEUES)
    finally:
        client.close()


def hosts_blocked(project: Project, since) -> list[dict]:
    """The hosts that answered the project block pages since `since`: how many (the health
    counters), and the latest one's rule, URL and time (its evidence)."""
    counts = counters_since(project.id, since, scope="host")
    blocked = {key: n for (_s, key, metric), n in counts.items() if metric == "fetch_blocked" and n}
    rows = HostBlock.objects.filter(project=project, host__in=list(blocked)).order_by("-seen_at")
    return [
        {"host": row.host, "blocked": blocked[row.host], "rule": row.rule, "url": row.url, "seen_at": row.seen_at}
        for row in rows
    ]
