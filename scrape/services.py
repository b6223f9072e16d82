"""The extract stage: claim fetched pages, extract them (scrape/extraction.py), then in one short
transaction insert what was discovered (sorted, so concurrent batches cannot deadlock), store the
items and hand each page's verdict to the frontier. A row the database refuses is failed alone:
its batch-mates are written one by one."""

import json
import logging
import math
import re
import zlib
from datetime import datetime

from django.db import DatabaseError, InterfaceError, OperationalError
from django.db.models import F
from django.utils import timezone

from core.batchsql import upsert
from core.transactions import atomic_with_retry
from crawl.frontier.assets import assets_link_many
from crawl.frontier.discovery import pages_discover
from crawl.frontier.pages import (
    pages_claim_for_extract,
    pages_claim_ready_for_extract,
    pages_extract_again,
    pages_fetch_resumes,
    pages_finish,
)
from crawl.frontier.stages import EXTRACT, job_scope
from crawl.frontier.verdicts import Done, Fail, Refetch
from crawl.frontier.wakeups import wakeup_taken
from crawl.models import Page, PageContent
from crawl.policy import rules_stamp
from crawl.results import pages_extracted
from crawl.services.freshness import revisit, versions_record
from crawlproject.queues import STAGES
from scrape.auto_render import auto_render_catch_up, auto_render_review
from scrape.extraction import PageResult, extract_page, project_rule_sets

from .health import extracted_count
from .models import HandlerLog, Item

log = logging.getLogger("crawlhub.extract")
_SURROGATE = re.compile("[\ud800-\udfff]")


def pages_extract(*, page_ids: list[int], worker: str = "", wake: str | None = None) -> int:
    """Extract the claimable fetched pages among page_ids, or, `page_ids` empty (a wake-up booked
    for `wake`, an ISO time), the fetched pages ready now across projects; returns how many new
    pages they led to (the frontier publishes them, and the new assets)."""
    if wake:
        wakeup_taken(EXTRACT, datetime.fromisoformat(wake))
    if page_ids:
        token, pages = pages_claim_for_extract(page_ids, worker=worker)
    else:
        token, pages = pages_claim_ready_for_extract(limit=STAGES[EXTRACT].batch(), worker=worker)
    contents = {c.page_id: c for c in PageContent.objects.filter(page_id__in=[p.id for p in pages])}
    by_project: dict[int, list[PageResult]] = {}
    for page in pages:
        by_project.setdefault(page.project_id, []).append(_extract_safely(page, contents.get(page.id)))
    discovered = 0
    for results in by_project.values():
        with job_scope(results[0].page.job_id):  # a wake-up serves every project's job: its own log and messages
            discovered += _write_batch(results, token, worker)
            auto_render_catch_up(
                results[0].page.project, [(r.page.id, r.plain_route) for r in results if r.plain_route]
            )
        pages_fetch_resumes(results[0].page.project)
    return discovered


def _write_batch(results: list[PageResult], token, worker: str) -> int:
    """Write the batch in one transaction; if the database refuses it, write page by page and fail
    only the page it refuses (with the reason), so one poison row never holds back the others."""
    try:
        return atomic_with_retry(_write, results, token, worker)
    except (DatabaseError, ValueError, TypeError) as exc:  # a row the database or its adapter refuses
        if isinstance(exc, OperationalError | InterfaceError):
            raise  # the database is away: the lease brings the batch back
        if len(results) == 1:
            log.warning("page %s refused by the database: %r", results[0].page.id, exc)
            failed = Fail("store_error", f"the database refused this page's results: {exc!r}"[:2000])
            atomic_with_retry(pages_finish, token=token, stage=EXTRACT, verdicts=[(results[0].page, failed)])
            return 0
        log.warning("extract batch refused (%r): writing its %d pages one by one", exc, len(results))
    return sum(_write_batch([result], token, worker) for result in results)


def _extract_safely(page: Page, content: PageContent | None) -> PageResult:
    try:
        body = zlib.decompress(content.body) if content is not None else b""
        result = extract_page(page, body, content.headers if content is not None else {})
        auto_render_review(page, result, body, project_rule_sets(page.project))
        return result
    except Exception as exc:
        log.exception("extraction failed for page %s", page.id)
        return PageResult(page=page, changes={}, error=("extract_error", repr(exc)[:2000]))


def _write(results: list[PageResult], token, worker: str) -> int:
    project = results[0].page.project
    refetched = [
        (r.page, Refetch("render_needed", "fetched again in the browser", {"request": r.refetch}))
        for r in results
        if r.refetch
    ]
    results = [r for r in results if not r.refetch]
    if refetched:
        pages_finish(token=token, stage=EXTRACT, verdicts=refetched)
    if not results:
        return 0
    new_ids = pages_discover(project=project, links=[link for r in results for link in r.links])
    refs = {r.page.id: r.media for r in results if r.media}
    pending_pages = assets_link_many(project=project, refs_by_page=refs)
    verdicts, versions = [], []
    for result in results:
        if result.failed:
            verdicts.append((result.page, Fail(*result.error, {"extracted_by": worker})))
            continue
        fields, revisit_seconds = _freshness(result, versions)
        fields |= _jsonb_safe(result.changes) | {"extracted_by": worker}
        waiting = result.page.id in pending_pages
        verdicts.append((result.page, Done(fields, revisit_seconds=revisit_seconds, awaiting_assets=waiting)))
    written = pages_finish(token=token, stage=EXTRACT, verdicts=verdicts)
    for page_id in {p.id for p, _ in verdicts} - written:
        log.warning("lease lost before finishing extraction of page %s", page_id)
    items_store([r for r in results if r.page.id in written])
    handler_logs_store([r for r in results if r.page.id in written])
    pages_extracted.send(sender=project, results=[r for r in results if r.page.id in written], clean=_jsonb_safe)
    versions_record([v for v in versions if v[0].id in written])
    extracted_count(project, [r for r in results if r.page.id in written], {v[0].id for v in versions})
    return len(new_ids)


def _freshness(result: PageResult, versions: list) -> tuple[dict, int]:
    """Change detection on the normalised text: a new version and a shorter revisit when it changed."""
    page, changes = result.page, result.changes
    stamp = {"itag": rules_stamp(page.project)}
    if "text_hash" not in changes:
        return stamp, revisit(page.project, page, changed=True)
    if changes["text_hash"] == page.text_hash:
        return stamp, revisit(page.project, page, changed=False)
    text = result.extraction.text if result.extraction else result.records_text
    versions.append((page, _jsonb_safe(changes), _jsonb_safe(text)))
    changed = {"changed_at": timezone.now(), "change_count": F("change_count") + 1}
    return stamp | changed, revisit(page.project, page, changed=True)


def items_store(results: list[PageResult]) -> None:
    """Upsert each page's items by (page, kind, position) and drop the ones it no longer has
    (a rule that now finds fewer items, a rule set removed): re-extraction leaves no stale items.
    Each item keeps the job that produced its data (a later job finding the same data leaves it).
    Every row written here gets the same updated_at, so the stale ones are the pages' other rows."""
    now = timezone.now()
    rows = [
        Item(
            project_id=r.page.project_id,
            page_id=r.page.id,
            kind=i.kind,
            position=i.position,
            data=_jsonb_safe(i.data),
            errors=_jsonb_safe(i.errors),
            rule_version=i.version,
            spider_version_id=i.spider_version,
            job_id=r.page.job_id,
        )
        for r in results
        for i in r.items
    ]
    upsert(
        Item,
        rows,
        conflict_fields=("page", "kind", "position"),
        update_fields=("data", "errors", "rule_version", "spider_version", "updated_at"),
        now=now,
        stamps={"job_id": "data"},  # the job that produced the data: the same data found again keeps it
    )
    if results:
        Item.objects.filter(page_id__in=[r.page.id for r in results]).exclude(updated_at=now).delete()


def handler_logs_store(results: list[PageResult]) -> None:
    """Each spider-parsed page keeps what its handler logged this time (and its traceback), in
    place of what the previous extraction logged."""
    logged = [r for r in results if r.handler_log is not None]
    if not logged:
        return
    HandlerLog.objects.filter(page_id__in=[r.page.id for r in logged]).delete()
    HandlerLog.objects.bulk_create(
        HandlerLog(page_id=r.page.id, at=line.at, level=line.level, message=_jsonb_safe(line.message))
        for r in logged
        for line in r.handler_log
    )


def _jsonb_safe(value):
    """Values the database can store: PostgreSQL refuses NUL characters and non-finite numbers, and
    no UTF-8 holds a lone surrogate (JSON's "\\ud800" escape); they become U+FFFD or null instead of
    failing the page. A container is first checked whole in its C-encoded JSON form, and returned
    as it is when none of these is in it (nearly always): walking every string in Python cost more
    than the page's extraction."""
    if isinstance(value, dict | list) and value:
        try:
            encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (ValueError, TypeError):  # a non-finite number, or a type JSON has no form for
            return _jsonb_mended(value)
        try:
            encoded.encode()  # UTF-8 holds no lone surrogate
        except UnicodeEncodeError:
            return _jsonb_mended(value)
        return _jsonb_mended(value) if "\\u0000" in encoded else value
    return _jsonb_mended(value)


def _jsonb_mended(value):
    if isinstance(value, str):
        value = value.replace("\x00", "\ufffd")
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    if isinstance(value, float) and not math.isfinite(value):
        return None  # NaN and infinities are not JSON
    if isinstance(value, dict):
        return {_jsonb_mended(k): _jsonb_mended(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonb_mended(v) for v in value]
    return value


def pages_reextract(*, project) -> int:
    """Hand a project's stored pages back to the extract stage (rules changed): no refetch."""
    return pages_extract_again(Page.objects.filter(project=project))
