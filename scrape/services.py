"""The extract stage: claim fetched pages, extract them (scrape/decide.py), then in one short
transaction insert what was discovered (sorted, so concurrent batches cannot deadlock), store the
items and finish each page's lease by compare-and-set."""

import logging
import zlib
from dataclasses import dataclass, field

from django.db.models import F
from django.utils import timezone

from crawl.db import upsert
from crawl.models import Page, PageContent
from crawl.retry import atomic_with_retry
from crawl.services.freshness import revisit, versions_record
from crawl.services.frontier import pages_claim_for_extract, pages_discover_many, pages_finish_many
from crawl.services.outcomes import rules_stamp
from media.services import assets_link_many

from .decide import PageResult, extract_page
from .models import Item

log = logging.getLogger("crawlhub.extract")


@dataclass
class ExtractOutcome:
    new_page_ids: list[int] = field(default_factory=list)
    new_asset_ids: list[int] = field(default_factory=list)
    hosts: dict[int, str] = field(default_factory=dict)
    rendered: set[int] = field(default_factory=set)  # new pages of projects that render JavaScript


def pages_extract(*, page_ids: list[int], worker: str = "") -> ExtractOutcome:
    """Extract the claimable fetched pages among page_ids; return what the next stages must do."""
    token, pages = pages_claim_for_extract(page_ids)
    contents = {c.page_id: c for c in PageContent.objects.filter(page_id__in=[p.id for p in pages])}
    results = [_extract_safely(page, contents.get(page.id)) for page in pages]
    outcome = ExtractOutcome()
    by_project: dict[int, list[PageResult]] = {}
    for result in results:
        by_project.setdefault(result.page.project_id, []).append(result)
    for project_results in by_project.values():
        atomic_with_retry(_write, project_results, token, worker, outcome)
    return outcome


def _extract_safely(page: Page, content: PageContent | None) -> PageResult:
    try:
        body = zlib.decompress(content.body) if content is not None else b""
        return extract_page(page, body, content.headers if content is not None else {})
    except Exception as exc:
        log.exception("extraction failed for page %s", page.id)
        failed = {"state": Page.State.FAILED, "error_code": "extract_error", "error_message": repr(exc)[:2000]}
        return PageResult(page=page, changes=failed)


def _write(results: list[PageResult], token, worker: str, outcome: ExtractOutcome) -> None:
    project = results[0].page.project
    new_ids = pages_discover_many(project=project, candidates=[c for r in results for c in r.links])
    outcome.new_page_ids += new_ids
    outcome.hosts.update(dict.fromkeys(new_ids, results[0].page.host))
    if project.render_js:
        outcome.rendered.update(new_ids)
    refs = {r.page.id: r.media for r in results if r.media}
    new_assets, pending_pages = assets_link_many(project=project, refs_by_page=refs)
    outcome.new_asset_ids += new_assets
    changes, versions = {}, []
    for result in results:
        changes[result.page.id] = result.changes | {"extracted_by": worker} | _freshness(result, versions)
        if result.page.id in pending_pages and changes[result.page.id]["state"] == Page.State.DONE:
            changes[result.page.id]["state"] = Page.State.EXTRACTED  # done once its media is downloaded
    written = pages_finish_many(token=token, from_state=Page.State.FETCHED, changes=changes)
    for page_id in set(changes) - written:
        log.warning("lease lost before finishing extraction of page %s", page_id)
    finished = [r for r in results if r.page.id in written]
    versions = [v for v in versions if v[0].id in written]
    items_store(finished)
    versions_record(versions)


def _freshness(result: PageResult, versions: list) -> dict:
    """Change detection on the normalised text: a new version and a shorter revisit when it changed."""
    page, changes = result.page, result.changes
    stamp = {"itag": rules_stamp(page.project)}
    if "text_hash" not in changes:
        return stamp | revisit(page.project, page, changed=True)
    if changes["text_hash"] == page.text_hash:
        return stamp | revisit(page.project, page, changed=False)
    versions.append((page, changes, result.extraction.text if result.extraction else ""))
    return (
        stamp
        | revisit(page.project, page, changed=True)
        | {"changed_at": timezone.now(), "change_count": F("change_count") + 1}
    )


def items_store(results: list[PageResult]) -> None:
    """Upsert each page's items by (page, kind, position) and drop the ones it no longer has
    (a rule that now finds fewer items, a rule set removed): re-extraction leaves no stale items.
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
        )
        for r in results
        for i in r.items
    ]
    upsert(
        Item,
        rows,
        conflict_fields=("page", "kind", "position"),
        update_fields=("data", "errors", "rule_version", "updated_at"),
        now=now,
    )
    if results:
        Item.objects.filter(page_id__in=[r.page.id for r in results]).exclude(updated_at=now).delete()


def _jsonb_safe(value):
    """PostgreSQL's jsonb refuses NUL characters in strings; they are replaced, not lost silently."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_jsonb_safe(k): _jsonb_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonb_safe(v) for v in value]
    return value


def pages_reextract(*, project) -> int:
    """Hand a project's stored pages back to the extract stage (rules changed): no refetch."""
    from crawl import pipeline

    stored = Page.objects.filter(project=project, state__in=[Page.State.DONE, Page.State.FAILED], content__isnull=False)
    ids = list(stored.values_list("id", flat=True))
    Page.objects.filter(id__in=ids).update(
        state=Page.State.FETCHED,
        lease_token=None,
        lease_expires_at=None,
        enqueued_at=timezone.now(),
        error_code="",
        error_message="",
    )
    pipeline.on_commit(pipeline.publish_extract, ids)
    return len(ids)
