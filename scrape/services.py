"""The extract stage: claim fetched pages, extract, discover links and media, finish by CAS."""

import logging
import zlib
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from crawl.models import Page, PageContent
from crawl.services.frontier import page_finish, pages_claim_for_extract, pages_discover
from media.services import assets_link

from .extractors import Extraction, extract_html, looks_like_html, media_kind_of
from .models import Item

log = logging.getLogger("crawlhub.extract")


@dataclass
class ExtractOutcome:
    new_page_ids: list[int] = field(default_factory=list)
    new_asset_ids: list[int] = field(default_factory=list)
    hosts: dict[int, str] = field(default_factory=dict)


def pages_extract(*, page_ids: list[int], worker: str = "") -> ExtractOutcome:
    """Extract the claimable fetched pages among page_ids; return what the next stages must do."""
    token, pages = pages_claim_for_extract(page_ids)
    contents = {c.page_id: c for c in PageContent.objects.filter(page_id__in=[p.id for p in pages])}
    outcome = ExtractOutcome()
    with transaction.atomic():
        for page in pages:
            _extract_one(page, contents.get(page.id), token, worker, outcome)
    return outcome


def _extract_one(page: Page, content: PageContent | None, token, worker: str, outcome: ExtractOutcome) -> None:
    try:
        changes = _process(page, content, outcome)
    except Exception as exc:  # noqa: BLE001 - one bad page must not sink the batch
        log.exception("extraction failed for page %s", page.id)
        changes = {"state": Page.State.FAILED, "error_code": "extract_error", "error_message": repr(exc)[:2000]}
    changes["extracted_by"] = worker
    if not page_finish(page_id=page.id, token=token, from_state=Page.State.FETCHED, **changes):
        log.warning("lease lost before finishing extraction of page %s", page.id)


def _process(page: Page, content: PageContent | None, outcome: ExtractOutcome) -> dict:
    if 300 <= (page.status_code or 0) < 400:
        return _follow_redirect(page, outcome)
    body = zlib.decompress(content.body) if content is not None else b""
    if not looks_like_html(page.content_type, body):
        return {"state": Page.State.DONE}
    extraction = extract_html(body, page.url, charset=_charset(content), max_links=settings.CRAWL_MAX_LINKS_PER_PAGE)
    pending_media = _discover(page, extraction, outcome)
    _store_item(page, extraction)
    state = Page.State.EXTRACTED if pending_media else Page.State.DONE
    return {"state": state, "title": extraction.title}


def _follow_redirect(page: Page, outcome: ExtractOutcome) -> dict:
    hops = page.redirect_hops + 1
    if hops > settings.CRAWL_MAX_REDIRECTS:
        return {"state": Page.State.FAILED, "error_code": "too_many_redirects",
                "error_message": f"more than {settings.CRAWL_MAX_REDIRECTS} redirects in a row"}
    new_ids = pages_discover(project=page.project, urls=[page.final_url], depth=page.depth,
                             parent_id=page.id, redirect_hops=hops)
    _remember(outcome, new_ids, page.host)
    return {"state": Page.State.DONE}


def _discover(page: Page, extraction: Extraction, outcome: ExtractOutcome) -> bool:
    """Queue the page's new links and media; True when some of its media is still to download."""
    download = page.project.download_media
    urls = [link.url for link in extraction.links if not (download and media_kind_of(link.url))]
    new_ids = pages_discover(project=page.project, urls=urls, depth=page.depth + 1, parent_id=page.id)
    _remember(outcome, new_ids, page.host)
    if not download or not extraction.media:
        return False
    new_assets, pending = assets_link(project=page.project, page_id=page.id,
                                      refs=[(m.url, m.kind) for m in extraction.media])
    outcome.new_asset_ids += new_assets
    return pending


def _remember(outcome: ExtractOutcome, new_ids: list[int], host: str) -> None:
    outcome.new_page_ids += new_ids
    outcome.hosts.update(dict.fromkeys(new_ids, host))


def _store_item(page: Page, extraction: Extraction) -> None:
    data = {"url": page.url, "title": extraction.title, "description": extraction.description,
            "lang": extraction.lang, "text": extraction.text, "links": len(extraction.links),
            "media": [m.url for m in extraction.media]}
    Item.objects.bulk_create(
        [Item(project_id=page.project_id, page_id=page.id, kind="page", data=data)],
        update_conflicts=True, unique_fields=["page", "kind"], update_fields=["data", "updated_at"],
    )


def _charset(content: PageContent | None) -> str | None:
    content_type = (content.headers if content else {}).get("content-type", "")
    for part in content_type.split(";")[1:]:
        name, _, value = part.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    return None
