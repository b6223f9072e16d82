"""Try one URL the way the crawl would: the same request (a seed's method, body and headers), the
same fetch (headless Chromium for render_js projects), the same extraction, and each link's fate as
discovery and the fetch stage would decide it. Writes nothing but the shared robots.txt cache
(pyspider's debugger, without running arbitrary code). Used by `manage.py tryurl`, the admin's
"Try a URL" page and the API's /api/try/."""

from collections import Counter
from dataclasses import asdict, dataclass, field

import lxml.etree

from console.masking import masked_response_headers, masked_url
from core.canonical import InvalidURL, Scope, canonicalize, host_of, origin_of, server_of, url_key
from core.net.client import FetchResponse, fetch_many, runner
from crawl.frontier.discovery import existing_keys, seed_request, within_budget, within_host_budgets
from crawl.frontier.stages import page_renders
from crawl.frontier.verdicts import Link
from crawl.hosts.robots_cache import robots_policies
from crawl.models import Page, Project
from crawl.policy import allows_private, fetch_limits, project_scope, user_agent_of
from fetch.rendering import render_page
from fetch.requests import Signer, SignError, build_request, page_client, page_proxy, render_request, signed
from fetch.session_pool import first_session
from scrape.extraction import PageResult, extract_page, extraction_fields
from scrape.extractors import media_kind_of
from scrape.rules import RuleError, compile_css, compile_xpath, match_texts, parse_html

MAX_MATCHES = 50  # texts of a tried selector's matches shown (all are counted)
FOLLOW = "follow"
SCOPE_FATES = {
    "depth": "depth",
    "offsite": "out of scope",
    "denied": "denied by pattern",
    "not_allowed": "not allowed by pattern",
}
# Every fate a link can get, in the order the reports list them.
FATES = (
    FOLLOW,
    "robots.txt",
    "already known",
    "page budget",
    *SCOPE_FATES.values(),
    "invalid URL",
    "nofollow",
    "media file",
    "not chosen by rules",
)


@dataclass(frozen=True)
class LinkFate:
    """What the crawl would do with one link of the page: follow it, or the reason it does not."""

    url: str
    fate: str
    reason: str = ""


@dataclass
class Trial:
    url: str
    error: str = ""
    status_code: int | None = None
    headers: dict = field(default_factory=dict)
    robots: str = ""
    body: bytes = b""  # the fetched response, for trying selectors on it
    result: PageResult | None = None
    fetch: dict = field(default_factory=dict)  # how it was fetched: method, rendered, request_from, depth, kind
    links: list[LinkFate] = field(default_factory=list)


def try_url(url: str, *, project: Project | None = None, allow_private: bool = False) -> Trial:
    """Everything the pipeline would do with `url` for `project`, without writing to the database."""
    project = project or Project(name="tryurl", slug="tryurl", allow_private=allow_private)
    try:
        canonical = canonicalize(url)
    except InvalidURL as exc:
        return Trial(url=url, error=f"{exc.code}: {exc}")
    page, request_from = _trial_page(project, canonical)
    trial = Trial(url=canonical, robots=robots_decision(project, canonical))
    response, trial.fetch = trial_fetch(project, page)
    trial.fetch |= {"request_from": request_from, "depth": page.depth, "kind": page.kind}
    trial.status_code, trial.headers = response.status_code, response.headers
    if response.error_code:
        trial.error = f"{response.error_code}: {response.error_message}"
        return trial
    page.status_code, page.content_type = response.status_code, response.content_type
    page.final_url = response.location or canonical
    trial.body = response.body
    trial.result = extract_page(page, response.body, response.headers)
    trial.links = link_fates(project, trial.result)
    return trial


def _trial_page(project: Project, canonical: str) -> tuple[Page, str]:
    """The page as the crawl would fetch it, and where its request comes from: its frontier row's
    depth, kind and request (what the crawl sends), else its seed's (method, body, headers), else a
    plain GET at depth 0. Never the row's validators: a 304 would leave nothing to extract."""
    page = Page(project=project, url=canonical, url_key=url_key(canonical), host=server_of(canonical), depth=0)
    if project.pk is None:
        return page, ""
    fields = ("depth", "kind", "request", "priority", "redirect_hops")
    row = Page.objects.filter(project=project, url_key=page.url_key).values(*fields).first()
    if row:
        for name, value in row.items():
            setattr(page, name, value)
        return page, "frontier row"
    seed = next((s for s in project.seeds.all() if _canonical_or_raw(s.url) == canonical), None)
    if seed is None:
        return page, ""
    page.kind, page.request, page.priority = seed.kind, seed_request(seed), seed.priority
    return page, "seed"


def trial_fetch(project: Project, page: Page, *, signer: Signer | None = None) -> tuple[FetchResponse, dict]:
    """The crawl's fetch of the page, with the project's session (read, never written here) and
    what its own request asks (proxy, render, timeout): rendered in headless Chromium when the
    request or the project says so, else build_request through the guarded client. `signer`: a
    spider's sign(), run on the request just before it is sent (a failure answers spider_error)."""
    private, agent, session = allows_private(project), user_agent_of(project), first_session(project)
    request = build_request(project, page, session=session)
    how = {"method": request.method, "body_bytes": len(request.body or b"")}
    how |= {"rendered": page_renders(project.render_js, page.request)} | _own_options(project, page)
    if signer is not None:
        try:
            request = signed(signer, page, request)
        except SignError as exc:
            failed = FetchResponse(url=page.url, error_code="spider_error", error_message=str(exc)[:4000])
            return failed, how | {"signed": False}
        how |= {"method": request.method, "body_bytes": len(request.body or b""), "signed": True}
    if how["rendered"]:
        proxy, private_proxy = page_proxy(project, page)
        own = render_request(project, page, session, built=request)
        rendered = render_page(request.url, allow_private=private, user_agent=agent, proxy=proxy,
                               private_proxy=private_proxy, request=own, timeout=request.timeout)  # fmt: skip
        return rendered, how
    request.client = page_client(project, page)  # a proxy of the request's own, as the crawl's
    client = runner.client(allow_private=private, proxy=project.proxy)
    (response,) = runner.run(fetch_many(client, [request], limits=fetch_limits(), concurrency=1))
    return response, how


def _own_options(project: Project, page: Page) -> dict:
    """What the page's own request changes in how it is fetched (shown; the proxy masked)."""
    own = {"timeout": page.request["timeout"]} if page.request.get("timeout") is not None else {}
    proxy, _ = page_proxy(project, page)
    if proxy != project.proxy:
        own["proxy"] = masked_url(proxy)
    return own


def robots_decision(project: Project, url: str) -> str:
    """robots.txt's decision on the page, read through the crawl's cache as the fetch stage reads it."""
    if not project.obey_robots:
        return "not obeyed by this project"
    agent = user_agent_of(project)
    policy = robots_policies(
        {origin_of(url)}, allow_private=allows_private(project), user_agent=agent, proxy=project.proxy
    )[origin_of(url)]
    if policy.allow_all:  # a 4xx for robots.txt: no rules were read, so none allowed it either
        return "allowed: the site has no robots.txt (it answered 4xx), so every URL may be fetched"
    return "allowed by its rules" if policy.allows(url, agent) else "refused: " + policy.refusal()[1]


def trial_report(trial: Trial, *, selector: str = "", selector_kind: str = "css") -> dict:
    """The trial as plain data (the command prints it; the admin page renders it). With a selector
    (selector_kind "css" or "xpath"), also what it finds on the fetched page."""
    report = {
        "url": trial.url,
        "status": trial.status_code,
        "robots": trial.robots,
        "error": trial.error,
        "headers": masked_response_headers(trial.headers),  # the site's Set-Cookie: its session, masked
        "fetch": trial.fetch,
    }
    if selector:
        report["selector"] = selector_report(trial, selector, kind=selector_kind)
    result = trial.result
    if result is None:
        return report
    extraction = result.extraction
    report |= {
        "page": _page_report(result),
        "items": [{"kind": i.kind, "position": i.position, "data": i.data, "errors": i.errors} for i in result.items],
        **links_report(trial),
        "media": [{"url": u, "kind": k} for u, k in result.media],
        "dropped": result.dropped,
        "handler_log": [
            {"at": x.at.isoformat(), "level": x.level, "message": x.message} for x in result.handler_log or []
        ],
    }
    if extraction is not None:
        report["fields"] = extraction_fields(extraction) | {"text": extraction.text[:2000]}
    return report


def _page_report(result) -> dict:
    """What the crawl would write on the page: done with its title, or failed with the error."""
    if result.failed:
        code, message = result.error
        return {"state": "failed", "error_code": code, "error_message": message}
    return {"state": "done"} | ({"title": result.changes["title"]} if "title" in result.changes else {})


def selector_report(trial: Trial, selector: str, *, kind: str = "css") -> dict:
    """What a CSS selector or XPath finds on the trial's page, parsed and compiled as rule sets are: how
    many matches, the text of the first MAX_MATCHES, or why it could not run."""
    report = {"selector": selector, "kind": kind, "count": 0, "matches": [], "error": ""}
    if trial.result is None:
        return report | {"error": "no page was fetched to try it on"}
    try:
        compiled = compile_css("selector", selector) if kind == "css" else compile_xpath("selector", selector)
        found = compiled(parse_html(trial.body))
    except (RuleError, lxml.etree.XPathError) as exc:  # XPathError: one that fails only on a real page
        return report | {"error": str(exc)}
    found = found if isinstance(found, list) else [found]  # count(), string(), boolean() give one value
    return report | {"count": len(found), "matches": match_texts(found[:MAX_MATCHES], "text")}


def links_report(trial: Trial) -> dict:
    """The links as plain data: `links`, the URLs the crawl would follow; `link_fates`, every link
    with its fate and reason; `link_counts`, how many links got each fate."""
    counts = Counter(f.fate for f in trial.links)
    return {
        "links": [f.url for f in trial.links if f.fate == FOLLOW],
        "link_fates": [asdict(f) for f in trial.links],
        "link_counts": {fate: counts[fate] for fate in FATES if counts[fate]},
    }


def fate_groups(link_fates: list[dict]) -> list[dict]:
    """A report's link_fates grouped by fate, in FATES order: [{"fate", "count", "links"}]."""
    groups = [{"fate": fate, "links": [f for f in link_fates if f["fate"] == fate]} for fate in FATES]
    return [g | {"count": len(g["links"])} for g in groups if g["links"]]


def link_fates(project: Project, result: PageResult) -> list[LinkFate]:
    """The fate of every link on the page, decided as the crawl decides it: what extraction hands on,
    then discovery (canonical form, scope, the frontier, the page budgets), then robots.txt, which
    the fetch stage reads (a link it refuses still joins the frontier, and fails there)."""
    fates, wanted = _scope_fates(_scope_of(project, result.page.url), result.links)
    for step in (_frontier_fates, _robots_fates):
        refused = step(project, wanted)
        fates |= refused
        wanted = {u: c for u, c in wanted.items() if u not in refused}
    fates |= {u: LinkFate(u, FOLLOW) for u in wanted}
    order = list(dict.fromkeys(link.url for link in result.links))
    return [fates[u] for u in order] + _dropped_by_extraction(project, result, order)


def _scope_of(project: Project, page_url: str) -> Scope:
    """The project's scope as its workers will have it (at its current change stamp); an ad-hoc
    trial's only seed is the tried URL, so its domain is that URL's host."""
    if project.pk is None:
        return Scope.build(domains=[host_of(page_url)])
    return project_scope(project)


def _scope_fates(scope: Scope, links: list[Link]) -> tuple[dict[str, LinkFate], dict[str, tuple[str, str]]]:
    """Fates of the links that are not crawlable URLs or out of scope, and (canonical, url_key) of
    the others, by link URL."""
    fates: dict[str, LinkFate] = {}
    wanted: dict[str, tuple[str, str]] = {}
    for link in links:
        if link.url in fates or link.url in wanted:
            continue
        try:
            canonical = canonicalize(link.url)
        except InvalidURL as exc:
            fates[link.url] = LinkFate(link.url, "invalid URL", f"{exc.code}: {exc}")
            continue
        refusal = scope.refusal(canonical, link.depth)
        if refusal:
            fates[link.url] = LinkFate(link.url, SCOPE_FATES[refusal[0]], refusal[1])
        else:
            wanted[link.url] = (canonical, url_key(canonical))
    return fates, wanted


def _frontier_fates(project: Project, wanted: dict[str, tuple[str, str]]) -> dict[str, LinkFate]:
    """Links whose row is in the project's frontier already, and new ones past a page budget."""
    if project.pk is None:
        return {}  # an ad-hoc trial has no frontier and no budget
    urls = {key: canonical for canonical, key in wanted.values()}
    known = existing_keys(project, sorted(urls))
    new_rows = [Page(project=project, url=urls[k], url_key=k, host=server_of(urls[k])) for k in sorted(urls)]
    over = _over_budget(project, [row for row in new_rows if row.url_key not in known])
    fates = {}
    for url, (_, key) in wanted.items():
        if key in known:
            fates[url] = LinkFate(url, "already known", "the project's frontier has this URL already")
        elif key in over:
            fates[url] = LinkFate(url, "page budget", over[key])
    return fates


def _over_budget(project: Project, rows: list[Page]) -> dict[str, str]:
    """Why each new row the crawl's own trimming (url_key order, each host's budget, then the
    project's) leaves out is left out, by url_key."""
    kept = {row.url_key for row in within_budget(project, rows)}
    per_host = project.max_pages_per_host
    host_kept = {row.url_key for row in (within_host_budgets(project, rows) if per_host is not None else rows)}
    reasons = {}
    for row in rows:
        if row.url_key not in host_kept:
            reasons[row.url_key] = f"max_pages_per_host ({per_host}) reached for {row.host}"
        elif row.url_key not in kept:
            reasons[row.url_key] = f"max_pages ({project.max_pages}) reached"
    return reasons


def _robots_fates(project: Project, wanted: dict[str, tuple[str, str]]) -> dict[str, LinkFate]:
    """Links robots.txt refuses to the project's user agent, read through the crawl's cache once
    per origin."""
    if not project.obey_robots or not wanted:
        return {}
    agent = user_agent_of(project)
    origins = {origin_of(canonical) for canonical, _ in wanted.values()}
    policies = robots_policies(origins, allow_private=allows_private(project), user_agent=agent, proxy=project.proxy)
    fates = {}
    for url, (canonical, _) in wanted.items():
        policy = policies[origin_of(canonical)]
        if not policy.allows(canonical, agent):
            code, message = policy.refusal()
            fates[url] = LinkFate(url, "robots.txt", f"{code}: {message}; it joins the frontier and fails when fetched")
    return fates


def _dropped_by_extraction(project: Project, result: PageResult, handed_on: list[str]) -> list[LinkFate]:
    """Links of the page that extraction does not hand on: nofollow ones (rel=nofollow, or the page's
    meta robots, obeyed with robots.txt), media files (downloaded, not crawled), and those the rule
    sets' follow/deny patterns or the spider did not choose."""
    if result.extraction is None:
        return []
    chooser = f"the spider {project.spider!r}" if project.spider else "the rule sets' follow/deny patterns"
    seen = {_canonical_or_raw(u) for u in handed_on}
    dropped = []
    for link in result.extraction.links:
        key = _canonical_or_raw(link.url)
        if key in seen:
            continue
        seen.add(key)
        if link.nofollow and project.obey_robots:
            dropped.append(LinkFate(link.url, "nofollow", "rel=nofollow or the page's meta robots: not followed"))
        elif project.download_media and media_kind_of(link.url):
            dropped.append(LinkFate(link.url, "media file", "downloaded as media, not crawled"))
        else:
            dropped.append(LinkFate(link.url, "not chosen by rules", f"{chooser} did not choose it"))
    return dropped


def _canonical_or_raw(url: str) -> str:
    try:
        return canonicalize(url)
    except InvalidURL:
        return url
