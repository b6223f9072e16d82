"""Transitions of page rows: claim for a stage, finish by verdict, requeue, complete, reschedule.

    queued -> leased (fetch) -> fetched -> (extract lease) -> extracted (media pending) -> done
                                                            `-> done
    any stage -> failed (a final error, or the attempt cap); done -> queued (recrawl due, operator)

Every write here is a compare-and-set (on the lease token, or on the state it leaves) and every
message is published after the commit it depends on.
"""

import logging
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from core.batchsql import chunked
from crawl.health import health_count
from crawl.hosts.codes import BACKOFF_CODES
from crawl.models import Page, PageContent, Project

from . import stages
from .fair import fair_rows, project_weights
from .leases import lease_claim, lease_finish, lease_holder
from .stages import stage_rows
from .verdicts import (
    BLOCKED,
    Done,
    Fail,
    Fetched,
    Postpone,
    Refetch,
    Retry,
    Verdict,
    error_columns,
    retry_at,
    retry_later_at,
)
from .wakeups import waiting_until, wakeups_group

QUEUED, LEASED, FETCHED = Page.State.QUEUED, Page.State.LEASED, Page.State.FETCHED
EXTRACTED, DONE, FAILED = Page.State.EXTRACTED, Page.State.DONE, Page.State.FAILED
CHUNK = 500
BY_PRIORITY = ("-priority", "id")
EXTRACT_BACKLOG = 10  # extract batches of a project's fetched pages that may wait before its fetching pauses

log = logging.getLogger("crawlhub.frontier")


def pages_ready(*, limit: int, render: bool, due) -> list[tuple[int, int, str]]:
    """(id, project_id, host) of up to `limit` queued pages due by `due`, fair between the active
    projects of the stage: each offers a share by its weight (highest priority, then earliest due, first),
    a share another project leaves unused goes to those with more, and the shares are interleaved.
    Rows another claim holds locked are skipped (PostgreSQL), so claims running at once take
    different pages. A project whose fetched pages wait for extraction beyond EXTRACT_BACKLOG
    batches fetches nothing more until they are extracted: its extract messages stay few, so
    another project's pages are never extracted behind a long queue of its own. Each project's
    share is one probe of the page_ready index (of page_ready_override for the pages of another
    stage's project that ask for this one, Request(render=)): the cost follows the batch and the
    number of projects, not the size of the frontier."""
    projects = _stage_projects(render)
    weights = {project_id: weight for project_id, (weight, _) in projects.items()}
    # A page whose request says not_before is taken once due, not `due`'s moment early.
    on_time = Q(next_fetch_at__lte=timezone.now()) | ~Q(request__has_key="not_before")

    def rows_of(project_id: int, offset: int, count: int) -> list:
        stage = stage_rows(render, project_renders=projects[project_id][1]) & on_time
        return _due_rows(project_id, due, offset, count, stage)

    return fair_rows(weights, limit, rows_of)


def _stage_projects(render: bool) -> dict[int, tuple[int, bool]]:
    """{project id: (weight, renders)} of the active projects whose fetching is not paused for their
    extract backlog: those of the stage, and the others, whose spiders' requests may ask for it."""
    backlogged = _backlogged()
    rows = Project.objects.filter(status=Project.Status.ACTIVE).order_by("id").values_list("id", "weight", "render_js")
    return {pid: (max(1, weight), renders) for pid, weight, renders in rows if pid not in backlogged}


BACKLOG_SECONDS = 1.0
_backlog_seen: list = [float("-inf"), frozenset()]  # when, and the projects found backlogged then


def backlog_recount() -> None:
    """The next question counts the backlogs again: after an extract batch, at a fetch wake-up (the
    batch may have resumed fetching), or in a test that makes a backlog and looks at once."""
    _backlog_seen[0] = float("-inf")


def _backlogged() -> frozenset[int]:
    """The projects whose fetched pages wait for extraction beyond EXTRACT_BACKLOG batches."""
    now = time.monotonic()
    if now - _backlog_seen[0] >= BACKLOG_SECONDS:
        backlog = EXTRACT_BACKLOG * settings.CRAWL_EXTRACT_BATCH
        counts = Page.objects.filter(state=FETCHED).values("project_id").annotate(n=Count("id")).filter(n__gt=backlog)
        _backlog_seen[:] = [now, frozenset(counts.values_list("project_id", flat=True))]
    return _backlog_seen[1]


def pages_fetch_resumes(project: Project) -> None:
    """An extract batch of the project is written: if its backlog no longer pauses its fetching, its
    stage wakes for the due pages (a wake-up already on its way serves)."""
    backlog_recount()
    fetching = _stage_projects(project.render_js)
    if project.id in fetching:
        pages_wake_when_due(render=project.render_js, early=0.0, least=0.0, projects=fetching)


def _due_rows(project_id: int, due, offset: int, count: int, stage: Q) -> list[tuple[int, int, str]]:
    rows = Page.objects.select_for_update(skip_locked=True, of=("self",)).filter(
        stage, project_id=project_id, state=QUEUED, suspect=False, next_fetch_at__lte=due
    )
    ordered = rows.order_by("-priority", "next_fetch_at").values_list("id", "project_id", "host")
    return list(ordered[offset : offset + count])


def pages_next_due(*, render: bool, projects: Iterable[int] | None = None):
    """When the earliest queued page of the stage's active projects (or of `projects`) is due (None:
    none waits). A project paused for its extract backlog waits for its extraction, which wakes the
    stage."""
    projects = list(_stage_projects(render) if projects is None else projects)
    waiting = Page.objects.filter(stage_rows(render), state=QUEUED, suspect=False, project_id__in=projects)
    return waiting.order_by("next_fetch_at").values_list("next_fetch_at", flat=True).first()


def pages_wake_when_due(*, render: bool, early: float, least: float, projects: Iterable[int] | None = None) -> None:
    """Book the fetch (or render) stage's next wake-up for when its earliest queued page is due,
    `early` seconds before (its slot is booked then), and at least `least` seconds from now."""
    due = pages_next_due(render=render, projects=projects)
    if due is not None:
        seconds = (due - timezone.now()).total_seconds() - early
        stages.wake_stage(stages.RENDER if render else stages.FETCH, countdown=max(seconds, least))


def pages_wait(starts: dict[int, object]) -> int:
    """Queued pages whose host cannot take them now wait for the start time each was given (their
    host's next free slots): no claim looks at them before then. Returns rows changed."""
    waiting = [Page(id=pid, next_fetch_at=at) for pid, at in starts.items()]
    return Page.objects.bulk_update(waiting, ["next_fetch_at"], batch_size=CHUNK)


def pages_send_alone(waits: dict[int, float]) -> None:
    """The reaper's pages (each claimed alone, by id) that a claim could not start now: each is
    sent again, alone, for when its host can take it (`waits`: seconds from now)."""
    for page_id, seconds in waits.items():
        stages.after_commit(stages.publish_fetch, [page_id], countdown=seconds, batch=1)


def pages_claim_for_fetch(
    page_ids: list[int], *, due=None, token=None, worker: str = ""
) -> tuple[uuid.UUID, list[Page]]:
    """Lease the queued pages among page_ids that are due by `due` (now by default), of active
    projects, highest priority first, in the name of `worker` (the reaper hands back what a worker
    whose heartbeats stopped holds). An expired lease is not claimable here: the reaper gives it
    back (and counts it) first."""
    active = list(project_weights(status=Project.Status.ACTIVE))
    claimable = Q(state=QUEUED, next_fetch_at__lte=due or timezone.now(), project_id__in=active)
    holder = {"fetched_by": lease_holder(worker)} if worker else {}
    token, pages = lease_claim(Page, page_ids, claimable=claimable, token=token, state=LEASED, **holder)
    return token, sorted(pages, key=lambda p: (-p.priority, p.id))


def pages_claim_for_extract(page_ids: list[int], *, worker: str = "") -> tuple[uuid.UUID, list[Page]]:
    """Lease fetched pages of active projects for extraction in the name of `worker` (the state
    stays `fetched`); attempts count from the fetch. A paused or stopped (cancelled) project's
    fetched pages wait, as its queued ones do: Start or Resume publishes them."""
    active = list(project_weights(status=Project.Status.ACTIVE))
    claimable = Q(
        state=FETCHED, attempts__lt=settings.CRAWL_MAX_ATTEMPTS, lease_token__isnull=True, project_id__in=active
    )
    holder = {"extracted_by": lease_holder(worker)} if worker else {}
    return lease_claim(Page, page_ids, claimable=claimable, **holder)


@transaction.atomic
def pages_claim_ready_for_extract(*, limit: int, worker: str = "") -> tuple[uuid.UUID, list[Page]]:
    """Lease up to `limit` fetched pages nobody holds, of active projects, fair between projects (a share by weight
    each, highest priority first), in one short transaction: rows another claim holds locked are skipped
    (PostgreSQL), so claims running at once take different pages. A full batch wakes the stage
    again after the commit (more may be ready, for another worker process). Each share is one
    probe of the page_extract_ready index: the cost follows the batch, not the backlog."""
    ids = fair_rows(project_weights(status=Project.Status.ACTIVE), limit, _extractable_ids)
    if len(ids) >= limit:
        transaction.on_commit(lambda: stages.wake_stage(stages.EXTRACT))
    return pages_claim_for_extract(ids, worker=worker)


def _extractable_ids(project_id: int, offset: int, count: int) -> list[int]:
    rows = Page.objects.select_for_update(skip_locked=True, of=("self",)).filter(
        project_id=project_id,
        state=FETCHED,
        lease_token__isnull=True,
        suspect=False,
        attempts__lt=settings.CRAWL_MAX_ATTEMPTS,
    )
    return list(rows.order_by("-priority", "id").values_list("id", flat=True)[offset : offset + count])


def pages_finish(*, token: uuid.UUID, stage: str, verdicts: list[tuple[Page, Verdict]]) -> set[int]:
    """Write each page's verdict while `token` still holds its lease in `stage`, and publish what
    is owed next after the commit (extraction of fetched pages, wake-ups of waiting ones). Returns
    the ids written; the others' lease was lost (the reaper gave them to another worker)."""
    from_state = LEASED if stage == stages.FETCH else FETCHED
    now = timezone.now()
    changes = {page.id: _columns(page, verdict, now) for page, verdict in verdicts}
    for page, _ in verdicts:
        if page.suspect:  # it came back without killing its worker: claimed with others again
            changes[page.id]["suspect"] = False
        if stage == stages.FETCH and changes[page.id].get("state") == FAILED:
            changes[page.id] |= {"etag": "", "last_modified": ""}  # they named the stored body, now dropped
    written = lease_finish(Page, token=token, from_state=from_state, changes=changes)
    mine = [(p, changes[p.id]) for p, _ in verdicts if p.id in written]
    if stage == stages.FETCH:
        _drop_stale_bodies([p.id for p, c in mine if c.get("state") == FAILED])
    stages.after_commit(stages.publish_extract, [p.id for p, c in mine if c.get("state") == FETCHED])
    _publish_wakeups([(p, c) for p, c in mine if c.get("state") == QUEUED and c.get("enqueued_at")], now)
    failures_log([(p.url, c) for p, c in mine if c.get("state") == FAILED], stage=stage)
    if stage == stages.FETCH:
        _fetches_count([(p, v) for p, v in verdicts if p.id in written])
    return written


def _drop_stale_bodies(page_ids: list[int]) -> None:
    """A page whose latest fetch failed (it answered 404, say) no longer has the body stored from an
    earlier answer: re-extraction must not turn it `done` with that body's items."""
    if page_ids:
        PageContent.objects.filter(page_id__in=page_ids).delete()


def _fetches_count(verdicts: list[tuple[Page, Verdict]]) -> None:
    """The fetch outcomes of a batch, per project and host, for the health counters (crawl/health.py)."""
    by_project: dict[int, Counter] = {}
    for page, verdict in verdicts:
        counts = by_project.setdefault(page.project_id, Counter())
        if (seen := fetch_outcome(verdict)) is None:
            continue
        outcome, code = seen
        for scope, key in (("project", ""), ("host", page.host)):
            counts[(scope, key, outcome)] += 1
            if code:
                counts[(scope, key, f"error:{code}")] += 1
    for project_id, counts in by_project.items():
        health_count(project_id, counts)


def fetch_outcome(verdict: Verdict) -> tuple[str, str] | None:
    """(metric, error code) of one fetch verdict: fetch_ok, fetch_blocked (a block page),
    fetch_backoff (the host asked us to wait), fetch_failed (unreachable, timed out, 5xx: the site
    may be down) or fetch_other; None for a page put back unsent (its host's slot was missed)."""
    from core.net.client import SLOT_MISSED, is_transient  # here: the fetcher's imports lead back to the frontier

    if isinstance(verdict, Fetched | Done):
        return "fetch_ok", ""
    if isinstance(verdict, Postpone) and verdict.code == SLOT_MISSED:
        return None
    if isinstance(verdict, Retry | Postpone) and verdict.code == BLOCKED:
        return "fetch_blocked", BLOCKED
    if isinstance(verdict, Postpone) and verdict.code in BACKOFF_CODES:
        return "fetch_backoff", verdict.code
    if isinstance(verdict, Retry | Postpone) or is_transient(verdict.code):
        return "fetch_failed", verdict.code
    return "fetch_other", verdict.code


def failures_log(rows: list[tuple[str, dict]], *, stage: str) -> None:
    """One warning per row that failed for good, with its URL and error code (the job log keeps them)."""
    for url, columns in rows:
        code, message = columns.get("error_code", ""), columns.get("error_message", "")
        log.warning("%s failed: %s %s: %s", stage, url, code, message[:300], extra={"url": url, "code": code})


def _columns(page: Page, verdict: Verdict, now) -> dict:
    """The row's columns for a verdict: the stage's own fields, then the frontier's."""
    cleared = {"error_code": "", "error_message": ""}
    if isinstance(verdict, Fetched):
        return verdict.fields | cleared | {"state": FETCHED, "attempts": 0, "enqueued_at": now}
    if isinstance(verdict, Done):
        columns = verdict.fields | cleared | {"state": EXTRACTED if verdict.awaiting_assets else DONE}
        if verdict.revisit_seconds is not None:
            due = now + timedelta(seconds=verdict.revisit_seconds)
            columns |= {"revisit_seconds": verdict.revisit_seconds, "next_fetch_at": due}
        return columns
    if isinstance(verdict, Refetch):
        due = {"state": QUEUED, "attempts": 0, "next_fetch_at": now, "enqueued_at": now}
        return verdict.fields | cleared | {"etag": "", "last_modified": "", "content_sha256": ""} | due
    error = error_columns(verdict)
    if isinstance(verdict, Postpone):
        wait = waiting_until(verdict.until, now)
        return verdict.fields | error | wait | {"state": QUEUED, "attempts": F("attempts") - 1}
    if isinstance(verdict, Retry):
        retries = page.request.get("retries")  # a spider's Request(retries=): its own cap
        due = retry_at(page.attempts, now, cap=None if retries is None else retries + 1)
        if due is None and retries is None and page_never_given_up(page):
            due = retry_later_at(page.attempts, now)
        if due is not None:
            return verdict.fields | error | waiting_until(due, now) | {"state": QUEUED}
    if isinstance(verdict, Retry | Fail):
        return verdict.fields | error | {"state": FAILED}
    raise TypeError(f"not a page verdict: {verdict!r}")


def page_never_given_up(page: Page) -> bool:
    """Pages fetched before, and the hubs of a project that recrawls on a schedule, are retried on
    the long schedule after a transient failure: a monitored site down for an hour is looked at
    again, not dropped. A new page, or a one-off crawl's seed, still fails (the crawl ends)."""
    if page.content_sha256:  # it answered with a body once: a page of the site, not a dead link
        return True
    scheduled = bool(page.project.recrawl_every_minutes or page.project.recrawl_crontab)
    return scheduled and (page.is_seed or page.kind in ("sitemap", "feed"))


def _publish_wakeups(rows: list[tuple[Page, dict]], now) -> None:
    hosts = {p.id: p.host for p, _ in rows}
    rendered = {p.id for p, _ in rows if stages.page_renders(p.project.render_js, p.request)}
    for countdown, ids in wakeups_group([(p.id, c["next_fetch_at"]) for p, c in rows], now).items():
        stages.after_commit(stages.publish_fetch, ids, hosts, rendered, countdown=countdown)


def pages_requeue(pages, *, from_states: tuple[str, ...], order=BY_PRIORITY) -> list[int]:
    """Queue the pages of the queryset that are in from_states, due now, with fresh attempts and no
    error, and publish them after the commit in `order` (highest priority first). Returns exactly
    the ids this call queued: each chunk is stamped with its own token (two dispatchers at once
    never queue a page twice; a claim overwrites the stamp)."""
    queued = []
    ids = list(pages.filter(state__in=from_states).order_by(*order).values_list("id", flat=True))
    for chunk in chunked(ids, CHUNK):
        token, now = uuid.uuid4(), timezone.now()
        Page.objects.filter(id__in=chunk, state__in=from_states).update(
            state=QUEUED,
            attempts=0,
            next_fetch_at=now,
            enqueued_at=now,
            lease_token=token,
            lease_expires_at=None,
            error_code="",
            error_message="",
            suspect=False,
        )
        rows = list(Page.objects.filter(lease_token=token, state=QUEUED).order_by(*order).values_list("id", "host"))
        stages.after_commit(stages.publish_fetch, [r[0] for r in rows], dict(rows))
        queued += [r[0] for r in rows]
    return queued


def pages_publish_owed(pages) -> int:
    """Publish every page of the queryset that is owed to the fetch or extract stage and not held
    by a live lease (start, resume, a crawl command picking up an interrupted run). Returns pages
    published."""
    now = timezone.now()
    owed = pages.filter(Q(state=QUEUED, next_fetch_at__lte=now) | Q(state=FETCHED, lease_token__isnull=True))
    rows = list(owed.order_by(*BY_PRIORITY).values_list("id", "host", "state", "suspect"))
    for chunk in chunked(rows, CHUNK):
        Page.objects.filter(id__in=[r[0] for r in chunk], state__in=(QUEUED, FETCHED)).update(enqueued_at=now)
        fetch = [r for r in chunk if r[2] == QUEUED and not r[3]]
        stages.after_commit(stages.publish_fetch, [r[0] for r in fetch], {r[0]: r[1] for r in fetch})
        suspects = [r[0] for r in chunk if r[2] == QUEUED and r[3]]
        stages.after_commit(stages.publish_fetch, suspects, batch=1)
        stages.after_commit(stages.publish_extract, [r[0] for r in chunk if r[2] == FETCHED and not r[3]])
        stages.after_commit(stages.publish_extract, [r[0] for r in chunk if r[2] == FETCHED and r[3]], batch=1)
    return len(rows)


def pages_extract_again(pages) -> int:
    """Hand finished pages with a stored response back to the extract stage (rules changed): no
    refetch. A page whose fetch failed (its stored body, if any, is an earlier answer's) keeps its
    failure; one whose extraction failed is extracted again. Returns pages handed back."""
    now = timezone.now()
    stored = pages.filter(state__in=(DONE, FAILED), content__isnull=False)
    stored = stored.exclude(state=FAILED, status_code__gte=400)  # failed at the fetch before bodies were dropped
    ids = list(stored.values_list("id", flat=True))
    for chunk in chunked(ids, CHUNK):
        Page.objects.filter(id__in=chunk, state__in=(DONE, FAILED)).update(
            state=FETCHED,
            attempts=0,
            lease_token=None,
            lease_expires_at=None,
            enqueued_at=now,
            error_code="",
            error_message="",
            suspect=False,
        )
        stages.after_commit(stages.publish_extract, chunk)
    return len(ids)


def pages_complete(pages) -> int:
    """Pages of the queryset that waited for their media (`extracted`) and have none pending are done."""
    return pages.filter(state=EXTRACTED).update(state=DONE, updated_at=timezone.now())
