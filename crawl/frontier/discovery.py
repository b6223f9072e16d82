"""New rows: discovered links and seeds join the frontier once (the unique index decides) and are
published to the fetch stage after the commit, highest priority first."""

import time
from collections import defaultdict
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Count, F
from django.db.models.functions import Greatest
from django.utils import timezone

from core.batchsql import chunked, insert_new, insert_new_ids
from core.canonical import InvalidURL, canonicalize, request_key, server_of, url_key
from crawl.models import Page, Project
from crawl.policy import project_scope

from . import stages
from .known_urls import known_keys
from .pages import DONE, pages_requeue
from .verdicts import Link

EXISTING_CHUNK = 500
MAX_LINKED_URL = 2000


def pages_discover(*, project: Project, links: list[Link]) -> list[int]:
    """Insert the in-scope links not yet known to the project and publish them after the commit;
    returns the ids of the new rows only.

    Rows are inserted in url_key order, so concurrent inserters take the unique index's locks in
    the same order and cannot deadlock. Of one URL linked several times, the least depth and the
    highest priority win. A request other than a plain GET (a spider's POST) is keyed by its method
    and body too. A link with an itag or an age may send a known done page back to the fetch stage.
    """
    scope = project_scope(project)
    wanted: dict[str, tuple[str, Link]] = {}  # url_key -> (canonical, the link that wins)
    packed: dict[str, int] = {}  # url_key -> its KnownKeys entry
    raws: dict[str, set[int]] = defaultdict(set)  # url_key -> the entries of the links that led to it
    revisiting: dict[str, Link] = {}  # url_key -> the first link with an itag or an age
    memo: dict[str | tuple[str, bool], tuple] = {}  # the batch's pages repeat the same links
    for link in links:
        raw_packed, canonical, key = _memo_link(memo, project.id, link)
        if canonical is None or scope.rejects(canonical, link.depth):
            continue  # known, invalid or out of scope
        if raw_packed is not None:
            raws[key].add(raw_packed)
        if key not in packed:
            packed[key] = known_keys.pack(project.id, key)
        if link.revisits_known:
            revisiting.setdefault(key, link)
        elif packed[key] in known_keys:
            continue
        if key not in wanted or _better(link, wanted[key][1]):
            wanted[key] = (canonical, link)
    existing = existing_keys(project, sorted(wanted))
    _revisit_known(project, {k: link for k, link in revisiting.items() if k in existing})
    new_keys = [k for k in sorted(wanted) if k not in existing]
    kept = within_budget(project, [_new_page(project, wanted[k][0], k, wanted[k][1]) for k in new_keys], take=True)
    insert_new_ids(Page, kept, conflict_fields=("project", "url_key"))
    pages_counted(project, sum(row.id is not None for row in kept))
    in_frontier = [k for k in packed if k not in wanted or k in existing] + [row.url_key for row in kept]
    learned = [packed[k] for k in in_frontier] + [r for k in in_frontier for r in raws[k]]
    transaction.on_commit(lambda: known_keys.add_all(learned))
    return _publish_new(project, [row for row in kept if row.id is not None])


def _better(link: Link, other: Link) -> bool:
    return (link.depth, -link.priority) < (other.depth, -other.priority)


def _publish_new(project: Project, rows: list[Page]) -> list[int]:
    """Publish new rows after the commit, highest priority first (a paused project's wait for
    its resume); returns their ids."""
    rows = sorted(rows, key=lambda r: (-r.priority, r.id))
    ids = [r.id for r in rows]
    if project.status != Project.Status.ACTIVE:
        return ids
    rendered = {r.id for r in rows if stages.page_renders(project.render_js, r.request)}
    stages.after_commit(stages.publish_fetch, ids, {r.id: r.host for r in rows}, rendered)
    return ids


def existing_keys(project: Project, keys: list[str]) -> set[str]:
    """The keys the project's frontier already has, by the unique index: a link this process has
    not seen lately costs a lookup, not a row built, sent and refused (the insert still guards races)."""
    found: set[str] = set()
    for chunk in chunked(keys, EXISTING_CHUNK):
        found.update(Page.objects.filter(project=project, url_key__in=chunk).values_list("url_key", flat=True))
    return found


def _revisit_known(project: Project, links: dict[str, Link]) -> list[int]:
    """Queue again the done pages among these known keys that their link asks to see again
    (pyspider's itag and age, a sitemap's lastmod): the link's itag differs from the one the row
    keeps (the row takes it, and forgets its validators and body hash so the answer is extracted
    again), the row was fetched longer ago than the link's age, or the link's lastmod is later than
    the row's fetch. A lastmod not later than the fetch says the page did not change: its next
    revisit moves out to the project's longest interval instead. One query, only for links that
    carry any of these."""
    if not links:
        return []
    now, retagged, due, unchanged = timezone.now(), [], [], []
    rows = Page.objects.filter(project=project, state=DONE, url_key__in=list(links))
    for page in rows.only("id", "url_key", "request", "fetched_at"):
        link = links[page.url_key]
        itag, age = link.request.get("itag"), link.request.get("age")
        if itag is not None and itag != page.request.get("itag", ""):
            page.request = {**page.request, "itag": itag}
            page.content_sha256 = page.etag = page.last_modified = ""
            retagged.append(page)
        elif age is not None and page.fetched_at and page.fetched_at < now - timedelta(seconds=age):
            due.append(page.id)
        elif link.lastmod is not None and page.fetched_at:
            (due if link.lastmod > page.fetched_at else unchanged).append(page.id)
    Page.objects.bulk_update(retagged, ["request", "content_sha256", "etag", "last_modified"])
    if unchanged:
        latest = F("fetched_at") + timedelta(seconds=project.revisit_max_seconds)
        waiting = Page.objects.filter(id__in=unchanged, state=DONE, is_seed=False)  # seeds keep their hub interval
        waiting.update(next_fetch_at=Greatest(F("next_fetch_at"), latest))
    ids = [page.id for page in retagged] + due
    return pages_requeue(Page.objects.filter(id__in=ids), from_states=(DONE,)) if ids else []


def _memo_link(memo: dict, project_id: int, link: Link) -> tuple[int | None, str | None, str | None]:
    """_link_of, once per URL of the batch; a request of its own (a POST) is not memoised."""
    if not link.request and link.lastmod is None:  # most links: a plain GET
        entry = link.url
    elif link.is_plain_get:
        entry = (link.url, link.revisits_known)
    else:
        return _link_of(project_id, link)
    if entry not in memo:
        memo[entry] = _link_of(project_id, link)
    return memo[entry]


def _link_of(project_id: int, link: Link) -> tuple[int | None, str | None, str | None]:
    """A link's KnownKeys entry (of the URL as linked), canonical URL and url_key; no canonical
    form when this process knows the link already (nothing more to do, unless it may revisit a
    known page) or it is not a crawlable URL. A request of its own has no raw entry: the raw
    URL's stands for the GET row."""
    raw_packed = known_keys.pack_raw(project_id, link.url) if link.is_plain_get else None
    if raw_packed is not None and raw_packed in known_keys and not link.revisits_known:
        return raw_packed, None, None
    try:
        canonical = canonicalize(link.url)
    except InvalidURL:
        return raw_packed, None, None
    return raw_packed, canonical, request_key(canonical, link.method, link.key_body)


def _new_page(project: Project, canonical: str, key: str, link: Link, **extra) -> Page:
    """A new row for the link; a request's `not_before` is its first due time."""
    now = timezone.now()
    due = max(now, not_before(link.request) or now)
    fields = {"next_fetch_at": due, "enqueued_at": now, "request": link.request} | extra
    return Page(
        project=project,
        url=canonical,
        url_key=key,
        linked_url=_as_linked(link.url, canonical),
        host=server_of(canonical),
        depth=link.depth,
        discovered_from_id=link.parent_id,
        redirect_hops=link.redirect_hops,
        kind=link.kind,
        priority=link.priority,
        **fields,
    )


def not_before(request: dict) -> datetime | None:
    """The time a request's `not_before` names (an ISO 8601 string in the row's JSON), if any."""
    value = request.get("not_before")
    try:
        return datetime.fromisoformat(value) if value else None
    except (TypeError, ValueError):
        return None


def _as_linked(url: str, canonical: str) -> str:
    """The URL as linked, kept when robots.txt could read it otherwise than the canonical form."""
    linked = url.split("#", 1)[0]
    return linked if linked != canonical and len(linked) <= MAX_LINKED_URL else ""


def within_budget(project: Project, rows: list[Page], *, take: bool = False) -> list[Page]:
    """Trim to the project's page budget and each host's (a calendar or session-id trap stops there).
    `take`: the rows are about to be inserted, in this transaction, followed by pages_counted: the
    project's row stays locked until the commit, so concurrent extractors share the budget instead
    of each seeing the same room (a dry run, Try a URL's, locks nothing)."""
    if project.max_pages_per_host is not None and rows:
        rows = within_host_budgets(project, rows)
    if project.max_pages is None or not rows:
        return rows
    return rows[: max(0, project.max_pages - project_page_count(project, lock=take))]


def project_page_count(project: Project, *, lock: bool = False) -> int:
    """The rows of the project's frontier, from its counter (Project.page_count), counted once when
    the counter is not set yet. `lock`: the project's row stays locked until the commit."""
    projects = Project.objects.filter(id=project.id)
    lock = lock and transaction.get_connection().in_atomic_block  # autocommit: nothing to hold it
    if lock:
        projects = projects.select_for_update()
    counted = projects.values_list("page_count", flat=True).first()
    if counted is None:
        counted = Page.objects.filter(project=project).count()
        if lock:
            projects.update(page_count=counted)
    return counted


def pages_counted(project: Project, added: int) -> None:
    """Count the rows just added to the project's frontier (a counter not set yet stays unset: it
    is counted when a budget first needs it)."""
    if added and project.max_pages is not None:
        Project.objects.filter(id=project.id, page_count__isnull=False).update(page_count=F("page_count") + added)


HOST_COUNT_SECONDS = 60.0
HOST_COUNT_ENTRIES = 10_000
_HOST_COUNTS: dict[tuple[int, str], tuple[float, int]] = {}  # (project, host) -> (counted at, rows)


def within_host_budgets(project: Project, rows: list[Page]) -> list[Page]:
    """The rows whose host still has room under max_pages_per_host. A host's count is read from
    the database when it may be near the cap; far below it (under half, counted in the last
    minute, plus what this process added since), no query is made, so the default cap costs a
    discovery batch nothing on ordinary hosts."""
    cap, now = project.max_pages_per_host, time.monotonic()
    wanted = defaultdict(int)
    for row in rows:
        wanted[row.host] += 1
    counts = {}
    for host, n in wanted.items():
        counted = _HOST_COUNTS.get((project.id, host))
        if counted and now - counted[0] < HOST_COUNT_SECONDS and counted[1] + n < cap // 2:
            counts[host] = counted[1]
    unknown = wanted.keys() - counts.keys()
    if unknown:
        if len(_HOST_COUNTS) > HOST_COUNT_ENTRIES:
            _HOST_COUNTS.clear()
        query = Page.objects.filter(project=project, host__in=unknown).values_list("host").annotate(n=Count("id"))
        fresh = dict(query)
        for host in unknown:
            counts[host] = fresh.get(host, 0)
            _HOST_COUNTS[(project.id, host)] = (now, counts[host])
    kept = []
    for row in rows:
        if counts[row.host] < cap:
            counts[row.host] += 1
            kept.append(row)
    for host in wanted:
        _HOST_COUNTS[(project.id, host)] = (_HOST_COUNTS[(project.id, host)][0], counts[host])
    return kept


def seeds_enqueue(project: Project) -> list[int]:
    """Put the project's active seeds in the frontier (published after the commit). A seed that is
    not a crawlable URL gets a failed row with the reason, so the user sees it instead of losing it."""
    new_rows: list[Page] = []
    bad = []
    if project.max_pages is not None:  # the counter's lock before any row's: the order discovery takes them
        project_page_count(project, lock=True)
    for seed in project.seeds.filter(active=True):
        try:
            canonical = canonicalize(seed.url)
        except InvalidURL as exc:
            bad.append(_failed_seed(project, seed.url, exc))
            continue
        link = Link(url=canonical, depth=0, kind=seed.kind, priority=seed.priority)
        page = _new_page(project, canonical, url_key(canonical), link, is_seed=True, request=seed_request(seed))
        insert_new_ids(Page, [page], conflict_fields=("project", "url_key"))
        new_rows += [page] if page.id is not None else []
    if bad:  # failed without a claim: they count for the job the project runs now
        job_id = Project.objects.filter(id=project.id).values_list("job_id", flat=True).first()
        for row in bad:
            row.job_id = job_id
        new_rows_failed = len(insert_new(Page, bad, conflict_fields=("project", "url_key")))
    else:
        new_rows_failed = 0
    pages_counted(project, len(new_rows) + new_rows_failed)
    return _publish_new(project, new_rows)


def requests_enqueue(project: Project, links: list[Link]) -> list[int]:
    """Put a spider's start requests in the frontier as seeds (the scope does not apply to them, it
    does to what they lead to), once per request key; a known done page whose link has an itag or
    an age is queued again as discovery does. Published after the commit; returns the new rows' ids."""
    rows: dict[str, Page] = {}
    revisiting: dict[str, Link] = {}
    for link in links:
        try:
            canonical = canonicalize(link.url)
        except InvalidURL:
            continue
        key = request_key(canonical, link.method, link.key_body)
        rows.setdefault(key, _new_page(project, canonical, key, link, is_seed=True))
        if link.revisits_known:
            revisiting.setdefault(key, link)
    if project.max_pages is not None:
        project_page_count(project, lock=True)
    kept = [rows[key] for key in sorted(rows)]
    insert_new_ids(Page, kept, conflict_fields=("project", "url_key"))
    new = [row for row in kept if row.id is not None]
    pages_counted(project, len(new))
    _revisit_known(project, {k: link for k, link in revisiting.items() if rows[k].id is None})
    return _publish_new(project, new)


def seed_request(seed) -> dict:
    """A seed's own method, body and headers (POST API endpoints), stored on its page row."""
    if seed.method.upper() == "GET" and not seed.body and not seed.headers:
        return {}
    return {"method": seed.method.upper(), "body": seed.body, "headers": seed.headers}


def _failed_seed(project: Project, raw_url: str, exc: InvalidURL) -> Page:
    link = Link(url=raw_url, depth=0)
    return _new_page(
        project,
        raw_url,
        url_key(raw_url),
        link,
        is_seed=True,
        state=Page.State.FAILED,
        error_code=exc.code,
        error_message=str(exc),
        enqueued_at=None,
    )
