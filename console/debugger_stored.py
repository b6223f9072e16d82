"""The debugger's "run on stored pages": a draft spider run on the project's last stored responses,
without touching the network, and compared with what the active version makes of the same pages
("the draft fills `price` on 30 of 30 pages, the active version on 0 of 30"). Runs in a worker
(console/debugger.py), the draft and the active version in the same limited child process."""

import zlib

from crawl.models import Page, PageContent, Project
from scrape.models import Item
from scrape.sandbox import Limits, sandbox_response, sources_run
from scrape.spider_versions import spider_version_active

EMPTY = (None, "", [], {})
MAX_SHOWN_PAGES = 100


def stored_pages(project: Project, count: int) -> list[tuple[Page, PageContent]]:
    """The project's `count` last fetched pages that have a stored response, newest first."""
    pages = list(
        Page.objects.filter(project=project, content__isnull=False)
        .order_by("-fetched_at", "-id")
        .only("id", "url", "status_code", "request")[:count]
    )
    contents = {c.page_id: c for c in PageContent.objects.filter(page_id__in=[p.id for p in pages])}
    return [(p, contents[p.id]) for p in pages if p.id in contents]


def active_source(project: Project) -> str | None:
    """The source of the project's active spider version, or None when it runs no deployed code."""
    version = spider_version_active(project)
    return version.source if version is not None else None


def stored_report(project: Project, source: str, *, count: int, limits: Limits) -> dict:
    """Run the draft (and the active version, when there is one) on the last `count` stored pages and
    compare, field by field, on how many pages each fills it."""
    pairs = stored_pages(project, count)
    responses = [
        sandbox_response(
            url=p.url, status=p.status_code or 200, headers=c.headers, body=zlib.decompress(c.body), request=p.request
        )
        for p, c in pairs
    ]
    active = active_source(project)
    sources = {"draft": source} | ({"active": active} if active is not None else {})
    answer = sources_run(sources, responses, limits=limits) if pairs else {n: {"runs": []} for n in sources}
    if "error" in answer["draft"]:
        return {"mode": "stored", "pages": len(pairs), "compile_error": answer["draft"]["error"]}
    draft = [run["items"] for run in answer["draft"]["runs"]]
    draft_errors = [run["error"] for run in answer["draft"]["runs"]]
    if active is not None and "runs" in answer.get("active", {}):
        theirs, against = [run["items"] for run in answer["active"]["runs"]], "the active version"
    else:
        theirs, against = _stored_items([p for p, _ in pairs]), "the stored items"
    return {
        "mode": "stored",
        "pages": len(pairs),
        "against": against,
        "fields": field_counts(draft, theirs),
        "draft_errors": sum(1 for e in draft_errors if e),
        "per_page": _per_page(pairs, draft, theirs, draft_errors)[:MAX_SHOWN_PAGES],
    }


def _stored_items(pages: list[Page]) -> list[list[dict]]:
    """The spider items the pipeline stored for each page (what the code active then made)."""
    by_page: dict[int, list[dict]] = {p.id: [] for p in pages}
    for page_id, data in Item.objects.filter(page_id__in=list(by_page), kind="spider").values_list("page_id", "data"):
        by_page[page_id].append(data)
    return [by_page[p.id] for p in pages]


def field_counts(draft: list[list[dict]], theirs: list[list[dict]]) -> list[dict]:
    """Per field: on how many pages the draft fills it, on how many the other side does, of the pages
    where either made an item."""
    with_items = [i for i in range(len(draft)) if draft[i] or theirs[i]]
    names = sorted({name for items in (*draft, *theirs) for item in items for name in item})
    return [
        {
            "name": name,
            "pages": len(with_items),
            "draft": sum(1 for i in with_items if _fills(draft[i], name)),
            "active": sum(1 for i in with_items if _fills(theirs[i], name)),
        }
        for name in names
    ]


def _fills(items: list[dict], name: str) -> bool:
    return any(isinstance(item, dict) and item.get(name) not in EMPTY for item in items)


def _per_page(pairs, draft, theirs, errors) -> list[dict]:
    return [
        {
            "page_id": page.id,
            "url": page.url,
            "draft_items": len(draft[i]),
            "active_items": len(theirs[i]),
            "error": errors[i],
            "differs": draft[i] != theirs[i],
        }
        for i, (page, _) in enumerate(pairs)
    ]
