"""Frontier writes: insert discovered URLs once, claim batches with leases, finish leases by CAS."""

import time
import uuid
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, F
from django.utils import timezone

from crawl.db import insert_new
from crawl.models import Page, Project
from crawl.urls import InvalidURL, Scope, canonicalize, host_of, parse_lines, url_key

_SCOPE_CACHE: dict[int, tuple[float, Scope]] = {}
SCOPE_CACHE_SECONDS = 30


def project_scope(project: Project) -> Scope:
    """The project's scope; domains default to the hosts of its seeds (cached briefly per process)."""
    cached = _SCOPE_CACHE.get(project.id)
    if cached and time.monotonic() - cached[0] < SCOPE_CACHE_SECONDS:
        return cached[1]
    domains = parse_lines(project.allowed_domains) or sorted(
        {host_of(u) for u in project.seeds.values_list("url", flat=True)} - {""}
    )
    scope = Scope.build(
        domains=domains,
        max_depth=project.max_depth,
        allow=parse_lines(project.allow_patterns),
        deny=parse_lines(project.deny_patterns),
    )
    _SCOPE_CACHE[project.id] = (time.monotonic(), scope)
    return scope


def forget_scope(project_id: int) -> None:
    _SCOPE_CACHE.pop(project_id, None)


def pages_discover(
    *, project: Project, urls: list[str], depth: int, parent_id: int | None = None, redirect_hops: int = 0
) -> list[int]:
    """Insert the in-scope URLs not yet known to the project; return the ids of the new rows only."""
    return pages_discover_many(project=project, candidates=[(u, depth, parent_id, redirect_hops) for u in urls])


def pages_discover_many(*, project: Project, candidates: list[tuple]) -> list[int]:
    """Like pages_discover for (url, depth, parent_id, redirect_hops[, kind]) candidates of many parents.

    Rows are inserted in url_key order, so concurrent inserters take the unique index's locks in
    the same order and cannot deadlock.
    """
    scope = project_scope(project)
    rows: dict[str, Page] = {}
    for raw, depth, parent_id, hops, *kind in candidates:
        try:
            canonical = canonicalize(raw)
        except InvalidURL:
            continue
        if scope.rejects(canonical, depth):
            continue
        key = url_key(canonical)
        if key not in rows or rows[key].depth > depth:
            rows[key] = _new_page(project, canonical, key, depth, parent_id, hops, kind=kind[0] if kind else "page")
    ordered = [rows[k] for k in sorted(rows)]
    return insert_new(Page, _within_budget(project, ordered), conflict_fields=("project", "url_key"))


def _new_page(project, canonical, key, depth, parent_id, redirect_hops, **extra) -> Page:
    now = timezone.now()
    fields = {"next_fetch_at": now, "enqueued_at": now} | extra
    return Page(
        project=project,
        url=canonical,
        url_key=key,
        host=host_of(canonical),
        depth=depth,
        discovered_from_id=parent_id,
        redirect_hops=redirect_hops,
        **fields,
    )


def _within_budget(project: Project, rows: list[Page]) -> list[Page]:
    """Trim to the project's page budget and each host's (a calendar or session-id trap stops there)."""
    if project.max_pages_per_host is not None and rows:
        rows = _within_host_budgets(project, rows)
    if project.max_pages is None:
        return rows
    room = project.max_pages - Page.objects.filter(project=project).count()
    return rows[: max(0, room)]


def _within_host_budgets(project: Project, rows: list[Page]) -> list[Page]:
    hosts = {r.host for r in rows}
    counts = Page.objects.filter(project=project, host__in=hosts).values_list("host").annotate(n=Count("id"))
    room = {h: project.max_pages_per_host for h in hosts} | {h: project.max_pages_per_host - n for h, n in counts}
    kept = []
    for row in rows:
        if room[row.host] > 0:
            room[row.host] -= 1
            kept.append(row)
    return kept


def seeds_enqueue(project: Project) -> list[int]:
    """Put the project's active seeds in the frontier. A seed that is not a crawlable URL gets a
    failed row with the reason, so the user sees it instead of losing it."""
    new_ids, bad = [], []
    for seed in project.seeds.filter(active=True):
        try:
            canonical = canonicalize(seed.url)
        except InvalidURL as exc:
            bad.append(_failed_seed(project, seed.url, exc))
            continue
        page = _new_page(
            project, canonical, url_key(canonical), 0, None, 0, is_seed=True, request=_request_of(seed), kind=seed.kind
        )
        new_ids += insert_new(Page, [page], conflict_fields=("project", "url_key"))
    insert_new(Page, bad, conflict_fields=("project", "url_key"))
    return new_ids


def _request_of(seed) -> dict:
    """A seed's own method, body and headers (POST API endpoints), stored on its page row."""
    if seed.method.upper() == "GET" and not seed.body and not seed.headers:
        return {}
    return {"method": seed.method.upper(), "body": seed.body, "headers": seed.headers}


def _failed_seed(project, raw_url, exc: InvalidURL) -> Page:
    return _new_page(
        project,
        raw_url,
        url_key(raw_url),
        0,
        None,
        0,
        is_seed=True,
        state=Page.State.FAILED,
        error_code=exc.code,
        error_message=str(exc),
        enqueued_at=None,
    )


def _lease_until():
    return timezone.now() + timedelta(seconds=settings.CRAWL_LEASE_SECONDS)


def _active_project_ids() -> list[int]:
    return list(Project.objects.filter(status=Project.Status.ACTIVE).values_list("id", flat=True))


def pages_claim_for_fetch(page_ids: list[int]) -> tuple[uuid.UUID, list[Page]]:
    """Lease the claimable pages among page_ids with one conditional UPDATE.

    A row is claimable when queued (and due), or leased with an expired lease. The UPDATE is a
    single-table compare-and-set, so two workers given the same ids never both win a row.
    """
    token = uuid.uuid4()
    Page.objects.filter(id__in=page_ids, project_id__in=_active_project_ids()).claimable_for_fetch().update(
        state=Page.State.LEASED, lease_token=token, lease_expires_at=_lease_until(), attempts=F("attempts") + 1
    )
    return token, list(Page.objects.filter(id__in=page_ids, lease_token=token).select_related("project"))


def pages_claim_for_extract(page_ids: list[int]) -> tuple[uuid.UUID, list[Page]]:
    """Lease fetched pages for extraction (same compare-and-set, state stays `fetched`)."""
    token = uuid.uuid4()
    Page.objects.filter(id__in=page_ids).claimable_for_extract().update(
        lease_token=token, lease_expires_at=_lease_until()
    )
    return token, list(Page.objects.filter(id__in=page_ids, lease_token=token).select_related("project"))


def page_finish(*, page_id: int, token: uuid.UUID, from_state: str, **changes) -> bool:
    """Write a stage's result only if this worker still holds the lease (a zombie's write fails)."""
    changes.setdefault("lease_token", None)
    changes.setdefault("lease_expires_at", None)
    changes["updated_at"] = timezone.now()
    return Page.objects.filter(id=page_id, lease_token=token, state=from_state).update(**changes) == 1


def pages_recrawl(*, project: Project, states=(Page.State.DONE,)) -> int:
    """Queue the project's finished pages again; the fetch stage sends their validators (ETag,
    Last-Modified), so an unchanged page costs a 304 and stores nothing."""
    return Page.objects.filter(project=project, state__in=states).update(
        state=Page.State.QUEUED,
        attempts=0,
        next_fetch_at=timezone.now(),
        enqueued_at=None,
        lease_token=None,
        lease_expires_at=None,
    )
