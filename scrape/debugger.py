"""Try one URL: fetch it through the real guarded client and run the real extraction, storing
nothing (pyspider's debugger, without running arbitrary code). Used by `manage.py tryurl` and the
admin's "Try a URL" page."""

from dataclasses import dataclass, field

import lxml.etree

from crawl.fetcher import fetch, runner
from crawl.models import Page, Project
from crawl.robots import policy_from_response
from crawl.services.fetching import allows_private, build_request, fetch_limits, user_agent_of
from crawl.urls import InvalidURL, canonicalize, host_of, origin_of

from .decide import PageResult, extract_page, extraction_fields
from .rules import RuleError, compile_css, compile_xpath, match_texts, parse_html

MAX_MATCHES = 50  # texts of a tried selector's matches shown (all are counted)


@dataclass
class Trial:
    url: str
    error: str = ""
    status_code: int | None = None
    headers: dict = field(default_factory=dict)
    robots: str = ""
    body: bytes = b""  # the fetched response, for trying selectors on it
    result: PageResult | None = None


def try_url(url: str, *, project: Project | None = None, allow_private: bool = False) -> Trial:
    """Everything the pipeline would do with `url` for `project`, without writing to the database."""
    project = project or Project(name="tryurl", slug="tryurl", allow_private=allow_private)
    try:
        canonical = canonicalize(url)
    except InvalidURL as exc:
        return Trial(url=url, error=f"{exc.code}: {exc}")
    page = Page(project=project, url=canonical, host=host_of(canonical), depth=0)
    trial = Trial(url=canonical, robots=_robots(project, canonical))
    request = build_request(project, page)
    client = runner.client(allow_private=allows_private(project), proxy=project.proxy)
    response = runner.run(
        fetch(
            client, canonical, headers=request.headers, limits=fetch_limits(), method=request.method, body=request.body
        )
    )
    trial.status_code, trial.headers = response.status_code, response.headers
    if response.error_code:
        trial.error = f"{response.error_code}: {response.error_message}"
        return trial
    page.status_code, page.content_type = response.status_code, response.content_type
    page.final_url = response.location or canonical
    trial.body = response.body
    trial.result = extract_page(page, response.body, response.headers)
    return trial


def _robots(project: Project, url: str) -> str:
    if not project.obey_robots:
        return "not obeyed by this project"
    client = runner.client(allow_private=allows_private(project), proxy=project.proxy)
    agent = user_agent_of(project)
    response = runner.run(
        fetch(client, f"{origin_of(url)}/robots.txt", headers={"User-Agent": agent}, limits=fetch_limits())
    )
    status = None if response.error_code else response.status_code
    body = response.body.decode("utf-8", errors="replace") if status and status < 300 else ""
    policy = policy_from_response(status, body, response.error_code)
    return "allowed" if policy.allows(url, agent) else "refused: " + policy.refusal()[1]


def trial_report(trial: Trial, *, selector: str = "", selector_kind: str = "css") -> dict:
    """The trial as plain data (the command prints it; the admin page renders it). With a selector
    (selector_kind "css" or "xpath"), also what it finds on the fetched page."""
    report = {
        "url": trial.url,
        "status": trial.status_code,
        "robots": trial.robots,
        "error": trial.error,
        "headers": trial.headers,
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
        "links": [link.url for link in result.links],
        "media": [{"url": u, "kind": k} for u, k in result.media],
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
