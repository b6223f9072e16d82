"""What extraction makes of one fetched response: items, links to follow, media to download, and
the page row's changes. Reads the project's rule sets but writes nothing, so the extract stage and
the `tryurl` debugger run exactly the same code.
"""

import hashlib
import json
import logging
from dataclasses import dataclass, field

from django.conf import settings

from core.canonical import host_of
from crawl.frontier.logins import login_pin
from crawl.frontier.verdicts import Link
from crawl.models import Page, Project
from crawl.policy import project_media_rules, project_snapshot
from scrape.auto_render import links_planned
from scrape.extractors import HTML_TYPES, Extraction, extract_html, looks_binary, looks_like_html, media_kind_of
from scrape.fingerprint import fingerprints
from scrape.jsonapi import ApiConfigError, compile_api_config, config_version
from scrape.models import RuleSet
from scrape.rules import CompiledRules, RuleError, compile_rules
from scrape.sitemaps import parse_listing
from scrape.spider_versions import has_spider, project_spider
from scrape.spiders import LogLine, Request, RequestError, Response, SpiderError, run_spider

log = logging.getLogger("crawlhub.extract")
MAX_ITEM_LINKS = 1000  # links stored with anchor text on the page item (all of them are followed)


@dataclass
class ItemRow:
    kind: str
    position: int
    data: dict
    errors: list = field(default_factory=list)
    version: str = ""
    spider_version: int | None = None  # the deployed spider version that made it (SpiderVersion id)


@dataclass
class PageResult:
    """What extraction decided for one page, before anything is written."""

    page: Page
    changes: dict
    links: list[Link] = field(default_factory=list)
    media: list[tuple[str, str]] = field(default_factory=list)  # (url, kind); kind "download": ID scraper jobs
    items: list[ItemRow] = field(default_factory=list)
    extraction: Extraction | None = None
    error: tuple[str, str] | None = None  # (code, message): extraction failed for good
    handler_log: list[LogLine] | None = None  # what the spider's handler logged (None: no spider ran)
    dropped: dict = field(default_factory=dict)  # what the per-page caps left out: {"items": 90000}
    records_text: str = ""  # a JSON API page's records as indented JSON: its version's text, for diffs
    refetch: dict | None = None  # fetch it again with this request (in the browser): scrape/auto_render.py
    plain_route: str = ""  # kept plain while this auto route samples (scrape/auto_render.py)

    @property
    def failed(self) -> bool:
        return self.error is not None


def project_rule_sets(project: Project) -> list[CompiledRules]:
    """The project's enabled rule sets, compiled, each with its own item kind; kept per process until
    the project's change stamp moves (saving or deleting a rule set moves rules_changed_at)."""
    if project.id is None:
        return []
    return project_snapshot(project, "rule_sets", _rule_sets)


def _rule_sets(project: Project) -> list[CompiledRules]:
    compiled: dict[str, CompiledRules] = {}
    for name, spec in (
        RuleSet.objects.filter(project_id=project.id, enabled=True).order_by("name").values_list("name", "spec")
    ):
        try:
            rules = compile_rules(spec, name=name)
        except RuleError:
            continue  # saved before a stricter check: skipped, the admin shows why on its next save
        if rules.kind in compiled:  # saved before kinds were checked: the two would overwrite each other's items
            log.warning("project %s: rule set %s skipped, its kind %s is another's", project.id, name, rules.kind)
            continue
        compiled[rules.kind] = rules
    return list(compiled.values())


def extract_page(page: Page, body: bytes, headers: dict) -> PageResult:
    """The whole extraction of one response (redirect, listing, JSON API, HTML, or not parsed)."""
    result = _extract(page, body, headers)
    result.links = links_planned(page.project, result.links, project_rule_sets(page.project))
    if not result.failed:
        result.changes.setdefault("parsed", True)  # it may have been a response not parsed before
    if not page.project.download_media:
        _record_media(result)
    _cap(result)
    return result


def _record_media(result: PageResult) -> None:
    """With download_media off nothing is downloaded: the media a rule set's ID scraper or a spider's
    Media() asked for are listed on the page's item (its `media` field; an item of kind "media"
    when the page has none), as the media found in the HTML are."""
    urls, result.media = [url for url, _ in result.media], []
    if not urls:
        return
    item = next((i for i in result.items if i.kind == "page"), None)
    if item is None:
        result.items.append(ItemRow("media", 0, {"url": result.page.url, "media": urls}))
        return
    item.data["media"] = list(dict.fromkeys([*item.data.get("media", []), *urls]))


def _cap(result: PageResult) -> None:
    """One page makes at most CRAWL_MAX_ITEMS_PER_PAGE items and CRAWL_MAX_MEDIA_PER_PAGE media
    references (rules and spiders add to what the HTML holds). What the caps leave out is counted in
    `dropped`, logged, and said on the page's item."""
    dropped = dict(result.extraction.dropped) if result.extraction else {}
    for name, limit in (("items", settings.CRAWL_MAX_ITEMS_PER_PAGE), ("media", settings.CRAWL_MAX_MEDIA_PER_PAGE)):
        values = getattr(result, name)
        if len(values) > limit:
            dropped[name] = dropped.get(name, 0) + len(values) - limit
            setattr(result, name, values[:limit])
    result.dropped = dropped
    if dropped:
        log.warning("page %s: over the per-page caps, left out %s", result.page.id, dropped)
        for item in result.items:
            if item.kind == "page":
                item.data["dropped"] = dropped


def _extract(page: Page, body: bytes, headers: dict) -> PageResult:
    if 300 <= (page.status_code or 0) < 400:
        return _redirect(page)
    if page.kind in ("sitemap", "feed"):
        return _listing(page, body)
    if has_spider(page.project) and not looks_like_html(page.content_type, body) and _spider_reads(page, body):
        return _routed(page, body, headers)
    if page.project.api_config and _looks_like_json(page.content_type, body):
        return _json_api(page, body)
    if not looks_like_html(page.content_type, body):
        return _not_parsed(page)
    if looks_binary(body):  # binary bytes served as HTML: a broken response, not a file
        kind = page.content_type if page.content_type in HTML_TYPES else "a body that looks like HTML"
        return _failed(page, "not_html", f"{kind} with binary bytes (NUL in the first KiB): nothing to extract")
    return _html(page, body, headers)


def _spider_reads(page: Page, body: bytes) -> bool:
    """Whether the project's spider reads this answer that is not HTML: its request names a handler
    (route=), or it is JSON or XML and one of the spider's @route patterns matches its URL."""
    if page.request.get("route"):
        return True
    if not (_looks_like_json(page.content_type, body) or _looks_like_xml(page.content_type, body)):
        return False
    try:
        return project_spider(page.project).routes(page.url)
    except SpiderError:
        return True  # the spider is missing: _apply_spider fails the page with the reason


def _looks_like_xml(content_type: str, body: bytes) -> bool:
    return "xml" in content_type or body.lstrip()[:1] == b"<"


def _not_parsed(page: Page) -> PageResult:
    """A response that is not HTML (a PDF, an image, JSON outside API mode): stored and done, with
    its content type, but not parsed, so no links or items (a media page is still downloaded)."""
    project = page.project
    kind = project_media_rules(project).media_page_kind(page.url) if project.download_media else None
    return PageResult(page=page, changes={"parsed": False, "title": ""}, media=[(page.url, kind)] if kind else [])


def _failed(page: Page, code: str, message: str) -> PageResult:
    return PageResult(page=page, changes={}, error=(code, message[:2000]))


def _redirect(page: Page) -> PageResult:
    hops = page.redirect_hops + 1
    if hops > settings.CRAWL_MAX_REDIRECTS:
        message = f"more than {settings.CRAWL_MAX_REDIRECTS} redirects in a row"
        return _failed(page, "too_many_redirects", message)
    link = Link(page.final_url, page.depth, page.id, hops, priority=page.priority, request=_redirected(page))
    return PageResult(page=page, changes={}, links=[link])


def _redirected(page: Page) -> dict:
    """A request follows its redirect with its route, meta, headers and cookies; its method and body
    only on 307 and 308 (any other redirect turns it into a GET, as browsers do); its headers and
    cookies (a seed's API key) only to the same host; a session's login only while it logs in."""
    request = {k: v for k, v in (page.request or {}).items() if k != "session"} | login_pin(page)
    if page.status_code not in (307, 308):
        request.pop("method", None)
        request.pop("body", None)
    if host_of(page.final_url) != host_of(page.url):
        request.pop("headers", None)
        request.pop("cookies", None)
    return request


def _listing(page: Page, body: bytes) -> PageResult:
    """A sitemap, sitemap index or feed: its URLs join the frontier at the listing's own depth
    (they are entry points, like seeds); child sitemaps are read the same way."""
    listing = parse_listing(body, base_url=page.final_url or page.url, content_type=page.content_type)
    if listing.error:
        return _failed(page, f"listing_{listing.error}", f"cannot read this {page.kind}")
    links = [Link(d.url, page.depth, page.id, 0, "page", lastmod=d.lastmod) for d in listing.urls]
    links += [Link(d.url, page.depth, page.id, 0, "sitemap", lastmod=d.lastmod) for d in listing.sitemaps]
    item = {"url": page.url, "kind": listing.kind, "urls": len(listing.urls), "sitemaps": len(listing.sitemaps)}
    return PageResult(page=page, changes={}, links=links, items=[ItemRow("listing", 0, item)])


def _looks_like_json(content_type: str, body: bytes) -> bool:
    return "json" in content_type or body.lstrip()[:1] in (b"{", b"[")


def _json_api(page: Page, body: bytes) -> PageResult:
    """JSON API mode: records (valid or not, each with its schema errors) and the next page."""
    try:
        config = compile_api_config(page.project.api_config)
    except ApiConfigError as exc:
        return _failed(page, "api_config", str(exc))
    result = config.extract(body, page.url, page.content_type)
    if result.error:
        return _failed(page, result.error.split(":", 1)[0], result.error)
    version = config_version(page.project.api_config)
    items = [
        ItemRow("api", i, r, e, version) for i, (r, e) in enumerate(zip(result.records, result.errors, strict=True))
    ]
    links = [Link(result.next_url, page.depth, page.id, 0, "page", page.priority)] if result.next_url else []
    # The records are the page's content: a new version (and a change in the feed) when they change.
    text = json.dumps(result.records, ensure_ascii=False, sort_keys=True, indent=1, default=str)
    changes = {"text_hash": hashlib.sha256(text.encode(errors="replace")).hexdigest()}
    return PageResult(page=page, changes=changes, links=links, items=items, records_text=text)


def _html(page: Page, body: bytes, headers: dict) -> PageResult:
    project = page.project
    extraction = extract_html(
        body, page.url, charset=_charset(headers), max_links=settings.CRAWL_MAX_LINKS_PER_PAGE, caps=_caps()
    )
    download = project.download_media
    # rel=nofollow and <meta name="robots" content="nofollow"> are obeyed with robots.txt.
    obey = project.obey_robots
    followed = [link for link in extraction.links if not (obey and link.nofollow)]
    links = [link.url for link in followed if not (download and media_kind_of(link.url))]
    media = [(m.url, m.kind) for m in extraction.media] if download else []
    page_kind = project_media_rules(project).media_page_kind(page.url) if download else None
    if page_kind:
        media.append((page.url, page_kind))  # the page itself is a video page or gallery
    items = [ItemRow("page", 0, _page_item(page, extraction, body, project.main_text))]
    changes = {"title": extraction.title, **_fingerprints(extraction.text)}
    priorities: dict[str, int] = {}
    links = _apply_rules(page, body, items, links, media, priorities)
    result_links = [Link(u, page.depth + 1, page.id, 0, priority=priorities.get(u, 0)) for u in links]
    error = handler_log = None
    if has_spider(project):
        result_links, error, handler_log = _apply_spider(page, body, headers, items, media, priorities)
    return PageResult(
        page=page,
        changes=changes,
        links=result_links,
        media=media,
        items=items,
        extraction=extraction,
        error=error,
        handler_log=handler_log,
    )


def _caps() -> dict:
    return {
        "media": settings.CRAWL_MAX_MEDIA_PER_PAGE,
        "opengraph": settings.CRAWL_MAX_OPENGRAPH_KEYS,
        "json_ld": settings.CRAWL_MAX_JSON_LD_BLOCKS,
    }


def _apply_rules(page: Page, body: bytes, items: list, links: list[str], media: list, priorities: dict) -> list[str]:
    """Items of every applicable rule set; their follow/deny patterns, when any, decide the links."""
    ruled_links, restricted = [], False
    for rules in project_rule_sets(page.project):
        if not rules.applies_to(page.url):
            continue
        result = rules.extract(body, page.url)
        items += [
            ItemRow(rules.kind, i, d, e, rules.version)
            for i, (d, e) in enumerate(zip(result.items, result.errors, strict=True))
        ]
        media += [(url, "download") for url in result.downloads]
        if rules.follow_patterns or rules.deny_patterns:
            restricted = True
            ruled_links += result.follow
        if rules.priority:
            for url in result.follow if (rules.follow_patterns or rules.deny_patterns) else links:
                priorities[url] = max(priorities.get(url, rules.priority), rules.priority)
    return list(dict.fromkeys(ruled_links)) if restricted else links


def _routed(page: Page, body: bytes, headers: dict) -> PageResult:
    """The answer to a spider's request that names its handler (a JSON API, say): the handler
    alone reads it, whatever its type."""
    items, media = [], []
    links, error, handler_log = _apply_spider(page, body, headers, items, media, {})
    return PageResult(
        page=page, changes={}, links=links, media=media, items=items, error=error, handler_log=handler_log
    )


def _apply_spider(
    page: Page, body: bytes, headers: dict, items: list, media: list, priorities: dict
) -> tuple[list[Link], tuple[str, str] | None, list[LogLine] | None]:
    """The project's Python spider decides the links, each with its request (method, body, route,
    meta...); its failure is the page's error, not the worker's. The page was fetched with its row's
    request, which the handler sees as response.request. Also returns what the handler logged."""
    try:
        spider = project_spider(page.project)
        request = Request.from_page_request(page.url, page.request, page.priority)
    except (SpiderError, RequestError) as exc:
        return [], ("spider_error", str(exc)[:2000]), None
    response = Response(url=page.url, status=page.status_code or 200, headers=headers, body=body, request=request)
    result = run_spider(spider, response)
    if result.error:
        return [], ("spider_error", result.error[:2000]), result.log
    version = page.project.spider_version_id
    items += [ItemRow("spider", i, data, spider_version=version) for i, data in enumerate(result.items)]
    media += result.media
    depth, pin = page.depth + 1, login_pin(page)  # a session's login: what it asks next is the session's
    links = [
        Link(r.url, depth, page.id, priority=r.priority or priorities.get(r.url, 0), request=r.page_request() | pin)
        for r in result.requests
    ]
    return links, None, result.log


def extraction_fields(extraction: Extraction) -> dict:
    """The standard fields of a page (the `page` item, and what the debugger shows)."""
    return {
        "title": extraction.title,
        "description": extraction.description,
        "lang": extraction.lang,
        "canonical": extraction.canonical,
        "headings": extraction.headings,
        "opengraph": extraction.opengraph,
        "json_ld": extraction.json_ld,
        "text": extraction.text,
    }


def _page_item(page: Page, extraction: Extraction, body: bytes, main_text: bool) -> dict:
    links = [{"url": link.url, "text": link.text, "nofollow": link.nofollow} for link in extraction.links]
    data = {
        "url": page.url,
        **extraction_fields(extraction),
        "links": links[:MAX_ITEM_LINKS],
        "link_count": len(links),
        "media": [m.url for m in extraction.media],
    }
    if main_text:
        import trafilatura  # opt-in and slow: loaded only for projects that ask for it

        data["main_text"] = trafilatura.extract(body, url=page.url) or ""
    return data


def _fingerprints(text: str) -> dict:
    digest, signature = fingerprints(text)
    return {"text_hash": digest, "simhash": signature - (1 << 64) if signature >= 1 << 63 else signature}


def _charset(headers: dict) -> str | None:
    for part in headers.get("content-type", "").split(";")[1:]:
        name, _, value = part.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    return None
