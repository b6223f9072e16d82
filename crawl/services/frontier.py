"""Frontier writes: insert discovered URLs once, claim batches with leases, finish leases by CAS."""

import time
import uuid
from collections import defaultdict
from datetime import timedelta

from django.conf import settings
from django.db import connections, transaction
from django.db.models import Count, F
from django.db.models.sql import Query
from django.utils import timezone

from crawl.db import chunked, insert_new
from crawl.models import Page, Project
from crawl.urls import InvalidURL, Scope, canonicalize, host_of, parse_lines, url_key

from .known_urls import known_keys

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
    wanted: dict[str, tuple] = {}  # url_key -> (canonical, depth, parent_id, hops, kind), the least depth
    packed: dict[str, int] = {}  # url_key -> its KnownKeys entry
    raws: dict[str, set[int]] = defaultdict(set)  # url_key -> the entries of the links that led to it
    memo: dict[str, tuple] = {}  # the batch's pages repeat the same links
    for raw, depth, parent_id, hops, *kind in candidates:
        if raw not in memo:
            memo[raw] = _link_of(project.id, raw)
        raw_packed, canonical, key = memo[raw]
        if canonical is None or scope.rejects(canonical, depth):
            continue  # known, invalid or out of scope
        raws[key].add(raw_packed)
        if key not in packed:
            packed[key] = known_keys.pack(project.id, key)
        if packed[key] in known_keys:
            continue
        if key not in wanted or wanted[key][1] > depth:
            wanted[key] = (canonical, depth, parent_id, hops, kind[0] if kind else "page")
    existing = _existing_keys(project, sorted(wanted))
    new_keys = [k for k in sorted(wanted) if k not in existing]
    kept = _within_budget(
        project, [_new_page(project, wanted[k][0], k, *wanted[k][1:4], kind=wanted[k][4]) for k in new_keys]
    )
    new_ids = insert_new(Page, kept, conflict_fields=("project", "url_key"))
    in_frontier = [k for k in packed if k not in wanted or k in existing] + [row.url_key for row in kept]
    learned = [packed[k] for k in in_frontier] + [r for k in in_frontier for r in raws[k]]
    transaction.on_commit(lambda: known_keys.add_all(learned))
    return new_ids


def _existing_keys(project: Project, keys: list[str]) -> set[str]:
    """The keys the project's frontier already has, by the unique index: a link this process has
    not seen lately costs a lookup, not a row built, sent and refused (the insert still guards races)."""
    found: set[str] = set()
    for chunk in chunked(keys, EXISTING_CHUNK):
        found.update(Page.objects.filter(project=project, url_key__in=chunk).values_list("url_key", flat=True))
    return found


EXISTING_CHUNK = 500


def _link_of(project_id: int, raw: str) -> tuple[int, str | None, str | None]:
    """A link's KnownKeys entry, canonical URL and url_key; no canonical form when this process
    knows the link already (nothing more to do) or it is not a crawlable URL."""
    raw_packed = known_keys.pack_raw(project_id, raw)
    if raw_packed in known_keys:
        return raw_packed, None, None
    try:
        canonical = canonicalize(raw)
    except InvalidURL:
        return raw_packed, None, None
    return raw_packed, canonical, url_key(canonical)


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


def pages_finish_many(*, token: uuid.UUID, from_state: str, changes: dict[int, dict]) -> set[int]:
    """Write each page's stage result only if this worker still holds its lease (a zombie's write
    fails): one compare-and-set UPDATE per chunk, each row getting its own values (CASE on the id
    where they differ); returns the ids written (the others' lease was lost)."""
    written = set()
    for ids in chunked(sorted(changes), FINISH_CHUNK):
        written |= _finish_chunk(token, from_state, {i: changes[i] for i in ids})
    return written


FINISH_CHUNK = 100


def _finish_chunk(token, from_state: str, changes: dict[int, dict]) -> set[int]:
    """One UPDATE ... WHERE id IN (...) AND lease_token = token AND state = from_state RETURNING id,
    written as SQL directly: Django's CASE/When expressions cost more CPU than the write itself."""
    connection = connections[Page.objects.db]
    now = timezone.now()
    released = {"lease_token": None, "lease_expires_at": None}
    rows = {pid: released | c | {"updated_at": now} for pid, c in changes.items()}
    writer = _ColumnWriter(connection, rows)
    assignments = [writer.assignment(name) for name in sorted({n for row in rows.values() for n in row})]
    qn, ids = connection.ops.quote_name, list(rows)
    sql = (
        f"UPDATE {qn(Page._meta.db_table)} SET {', '.join(assignments)} "
        f"WHERE {qn('id')} IN ({', '.join(['%s'] * len(ids))}) AND {qn('lease_token')} = %s AND {qn('state')} = %s "
        f"RETURNING {qn('id')}"
    )
    token_value = Page._meta.get_field("lease_token").get_db_prep_value(token, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*writer.params, *ids, token_value, from_state])
        return {row[0] for row in cursor.fetchall()}


class _ColumnWriter:
    """SET clauses for per-row values: one value when every row agrees, else a CASE on the id
    (rows without the column keep what they have). Expressions such as F("attempts") - 1 are
    compiled by Django once each."""

    def __init__(self, connection, rows: dict[int, dict]):
        self.connection, self.rows, self.params = connection, rows, []
        self.compiler = Query(Page).get_compiler(connection=connection)
        self.casts = connection.vendor == "postgresql"  # a typed literal in every CASE branch

    def assignment(self, name: str) -> str:
        field = Page._meta.get_field(name)
        column = self.connection.ops.quote_name(field.column)
        present = [(pid, row[name]) for pid, row in self.rows.items() if name in row]
        first = present[0][1]
        if len(present) == len(self.rows) and all(type(v) is type(first) and v == first for _, v in present):
            return f"{column} = {self.value(field, first)}"
        branches = []
        for pid, value in present:
            self.params.append(pid)
            branches.append(f"WHEN %s THEN {self.value(field, value)}")
        return f"{column} = CASE {self.connection.ops.quote_name('id')} {' '.join(branches)} ELSE {column} END"

    def value(self, field, value) -> str:
        if hasattr(value, "resolve_expression"):
            sql, params = self.compiler.compile(value.resolve_expression(self.compiler.query, for_save=True))
            self.params.extend(params)
            return sql
        self.params.append(field.get_db_prep_save(value, self.connection))
        return f"%s::{field.cast_db_type(self.connection)}" if self.casts else "%s"


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
