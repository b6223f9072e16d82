"""The extract stage: claim fetched pages, extract, discover links and media, finish by CAS.

Two phases: pure extraction of every page of the batch (no writes), then one short transaction
that inserts what was discovered (sorted, so concurrent batches cannot deadlock) and finishes
each page's lease.
"""

import logging
import zlib
from dataclasses import dataclass, field

from django.conf import settings

from crawl.models import Page, PageContent
from crawl.retry import atomic_with_retry
from crawl.services.frontier import page_finish, pages_claim_for_extract, pages_discover_many
from crawl.sitemaps import parse_listing
from media.downloading import project_media_rules
from media.services import assets_link_many

from .extractors import Extraction, extract_html, looks_binary, looks_like_html, media_kind_of
from .models import Item

log = logging.getLogger("crawlhub.extract")


@dataclass
class ExtractOutcome:
    new_page_ids: list[int] = field(default_factory=list)
    new_asset_ids: list[int] = field(default_factory=list)
    hosts: dict[int, str] = field(default_factory=dict)


@dataclass
class PageResult:
    """What extraction decided for one page, before anything is written."""

    page: Page
    changes: dict
    links: list[tuple[str, int, int | None, int]] = field(default_factory=list)
    media: list[tuple[str, str]] = field(default_factory=list)
    item: dict | None = None


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
        return _extract(page, content)
    except Exception as exc:
        log.exception("extraction failed for page %s", page.id)
        failed = {"state": Page.State.FAILED, "error_code": "extract_error", "error_message": repr(exc)[:2000]}
        return PageResult(page=page, changes=failed)


def _extract(page: Page, content: PageContent | None) -> PageResult:
    if 300 <= (page.status_code or 0) < 400:
        return _redirect(page)
    body = zlib.decompress(content.body) if content is not None else b""
    if page.kind in ("sitemap", "feed"):
        return _listing(page, body)
    if not looks_like_html(page.content_type, body) or looks_binary(body):
        kind = page.content_type or "a body of unknown type"
        message = f"{kind} is not HTML{' (binary bytes)' if looks_binary(body) else ''}: nothing to extract"
        return PageResult(
            page=page, changes={"state": Page.State.FAILED, "error_code": "not_html", "error_message": message}
        )
    extraction = extract_html(body, page.url, charset=_charset(content), max_links=settings.CRAWL_MAX_LINKS_PER_PAGE)
    download = page.project.download_media
    links = [
        (link.url, page.depth + 1, page.id, 0)
        for link in extraction.links
        if not (download and media_kind_of(link.url))
    ]
    media = [(m.url, m.kind) for m in extraction.media] if download else []
    page_kind = project_media_rules(page.project).media_page_kind(page.url) if download else None
    if page_kind:
        media.append((page.url, page_kind))  # the page itself is a video page or gallery
    return PageResult(
        page=page,
        changes={"state": Page.State.DONE, "title": extraction.title},
        links=links,
        media=media,
        item=_item_data(page, extraction),
    )


def _listing(page: Page, body: bytes) -> PageResult:
    """A sitemap, sitemap index or feed: its URLs join the frontier at the listing's own depth
    (they are entry points, like seeds); child sitemaps are read the same way."""
    listing = parse_listing(body, base_url=page.final_url or page.url, content_type=page.content_type)
    if listing.error:
        failed = {
            "state": Page.State.FAILED,
            "error_code": f"listing_{listing.error}",
            "error_message": f"cannot read this {page.kind}: {listing.error}",
        }
        return PageResult(page=page, changes=failed)
    links = [(d.url, page.depth, page.id, 0, "page") for d in listing.urls]
    links += [(d.url, page.depth, page.id, 0, "sitemap") for d in listing.sitemaps]
    item = {"url": page.url, "kind": listing.kind, "urls": len(listing.urls), "sitemaps": len(listing.sitemaps)}
    return PageResult(page=page, changes={"state": Page.State.DONE}, links=links, item=item)


def _redirect(page: Page) -> PageResult:
    hops = page.redirect_hops + 1
    if hops > settings.CRAWL_MAX_REDIRECTS:
        failed = {
            "state": Page.State.FAILED,
            "error_code": "too_many_redirects",
            "error_message": f"more than {settings.CRAWL_MAX_REDIRECTS} redirects in a row",
        }
        return PageResult(page=page, changes=failed)
    return PageResult(
        page=page, changes={"state": Page.State.DONE}, links=[(page.final_url, page.depth, page.id, hops)]
    )


def _write(results: list[PageResult], token, worker: str, outcome: ExtractOutcome) -> None:
    project = results[0].page.project
    new_ids = pages_discover_many(project=project, candidates=[c for r in results for c in r.links])
    outcome.new_page_ids += new_ids
    outcome.hosts.update(dict.fromkeys(new_ids, results[0].page.host))
    refs = {r.page.id: r.media for r in results if r.media}
    new_assets, pending_pages = assets_link_many(project=project, refs_by_page=refs)
    outcome.new_asset_ids += new_assets
    finished = []
    for result in sorted(results, key=lambda r: r.page.id):
        changes = result.changes | {"extracted_by": worker}
        if result.page.id in pending_pages:
            changes["state"] = Page.State.EXTRACTED  # done once its media is downloaded
        if page_finish(page_id=result.page.id, token=token, from_state=Page.State.FETCHED, **changes):
            finished.append(result)
        else:
            log.warning("lease lost before finishing extraction of page %s", result.page.id)
    _store_items(finished)


def _item_data(page: Page, extraction: Extraction) -> dict:
    return {
        "url": page.url,
        "title": extraction.title,
        "description": extraction.description,
        "lang": extraction.lang,
        "text": extraction.text,
        "links": len(extraction.links),
        "media": [m.url for m in extraction.media],
    }


def _store_items(results: list[PageResult]) -> None:
    items = [
        Item(project_id=r.page.project_id, page_id=r.page.id, kind="page", data=r.item)
        for r in results
        if r.item is not None
    ]
    Item.objects.bulk_create(
        items, update_conflicts=True, unique_fields=["page", "kind"], update_fields=["data", "updated_at"]
    )


def _charset(content: PageContent | None) -> str | None:
    content_type = (content.headers if content else {}).get("content-type", "")
    for part in content_type.split(";")[1:]:
        name, _, value = part.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    return None
