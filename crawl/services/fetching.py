"""The fetch stage: claim a batch, obey robots.txt and politeness, fetch concurrently, record each
result by compare-and-set on the lease."""

import logging
import time
import zlib
from collections import defaultdict

from django.conf import settings
from django.db import transaction
from structlog.contextvars import bound_contextvars

from crawl.fetcher import FetchLimits, FetchRequest, FetchResponse, fetch_many, retry_after_seconds, runner
from crawl.frontier.pages import pages_claim_for_fetch, pages_finish
from crawl.frontier.stages import FETCH
from crawl.frontier.verdicts import Fetched, Postpone
from crawl.models import Page, PageContent, Project
from crawl.urls import host_of, origin_of

from .credentials import project_secrets_for
from .outcomes import failure, outcome
from .politeness import host_back_off, hosts_plan, hosts_release
from .projects import sitemaps_offer
from .rendering import render_page
from .robots_cache import robots_policies

log = logging.getLogger("crawlhub.fetch")


def fetch_limits() -> FetchLimits:
    return FetchLimits(
        connect_timeout=settings.CRAWL_CONNECT_TIMEOUT,
        read_timeout=settings.CRAWL_READ_TIMEOUT,
        total_timeout=settings.CRAWL_TOTAL_TIMEOUT,
        max_bytes=settings.CRAWL_MAX_BODY_BYTES,
    )


def user_agent_of(project: Project) -> str:
    return project.user_agent or settings.CRAWL_DEFAULT_USER_AGENT


def allows_private(project: Project) -> bool:
    return project.allow_private or settings.CRAWL_ALLOW_PRIVATE


def pages_fetch(*, page_ids: list[int], worker: str = "", render: bool = False) -> list[int]:
    """Fetch the claimable pages among page_ids (in headless Chromium when `render`); return the
    ids now `fetched` (the frontier hands them to the extract stage)."""
    token, pages = pages_claim_for_fetch(page_ids)
    by_project = defaultdict(list)
    for page in pages:
        by_project[page.project_id].append(page)
    fetched = []
    for project_id, project_pages in by_project.items():
        with bound_contextvars(project_id=project_id):  # every log line below names the project
            done = _fetch_project_pages(project_pages, token, worker, render)
            log.info("fetched %d of %d claimed pages", len(done), len(project_pages))
        fetched += done
    return fetched


def _fetch_project_pages(pages: list[Page], token, worker: str, render: bool) -> list[int]:
    project = pages[0].project
    agent, private = user_agent_of(project), allows_private(project)
    allowed, refused, delays = _split_by_robots(pages, project, agent, private)
    now_pages, later, requests, per_host = _schedule(project, allowed, delays, refused, token)
    try:
        if render:
            responses = _render_all(requests, private, agent, project.proxy)
        else:
            client = runner.client(allow_private=private, proxy=project.proxy)
            responses = runner.run(
                fetch_many(client, requests, limits=fetch_limits(), concurrency=project.concurrency, per_host=per_host)
            )
    finally:
        hosts_release(token)
    backoffs = _record_backoffs(responses)
    verdicts = []
    for page, (code, message) in refused:
        verdicts.append((page, failure(code, message, {"fetched_by": worker})))
    for page, when in later:
        verdicts.append((page, Postpone("host_busy", "waiting for the host's next politeness slot", when)))
    for page, response in zip(now_pages, responses, strict=True):
        verdict = outcome(page, response, backoffs.get(page.host))
        verdict.fields["fetched_by"] = worker
        verdicts.append((page, verdict))
    with transaction.atomic():
        written = pages_finish(token=token, stage=FETCH, verdicts=verdicts)
        return _store_contents(now_pages, responses, dict(verdicts), written)


def _render_all(requests: list[FetchRequest], private: bool, agent: str, proxy: str) -> list[FetchResponse]:
    """One page at a time in this process's headless Chromium, each at its politeness slot."""
    responses = []
    for request in requests:
        time.sleep(max(0.0, request.start_at - time.time()))
        responses.append(render_page(request.url, allow_private=private, user_agent=agent, proxy=proxy))
    return responses


def _split_by_robots(pages, project, agent, private) -> tuple[list[Page], list, dict]:
    """Pages robots.txt lets us fetch, (page, (error_code, message)) for the others, and the
    Crawl-delay of each host."""
    if not project.obey_robots:
        return pages, [], {}
    policies = robots_policies(
        {origin_of(p.url) for p in pages}, allow_private=private, user_agent=agent, proxy=project.proxy
    )
    _offer_sitemaps(project, policies)
    allowed, refused, delays = [], [], {}
    for page in pages:
        policy = policies[origin_of(page.url)]
        delays[page.host] = policy.crawl_delay(agent)
        if policy.allows(page.url, agent):
            allowed.append(page)
        else:
            refused.append((page, policy.refusal()))
    return allowed, refused, delays


def _offer_sitemaps(project: Project, policies: dict) -> None:
    urls = sorted({url for policy in policies.values() for url in policy.sitemaps()})
    if urls:
        sitemaps_offer(project=project, urls=urls)


def _schedule(project, pages, delays, refused, token) -> tuple[list[Page], list, list[FetchRequest], dict]:
    """Politeness: which pages go now (with their start times), which wait for later, and how
    many requests may be open to each host at once."""
    by_host = defaultdict(list)
    for page in pages:
        by_host[page.host].append(page)
    wanted = {h: len(p) for h, p in by_host.items()}
    plans = hosts_plan(project=project, wanted=wanted, crawl_delays=delays, token=token)
    now_pages, later, requests = [], [], []
    for host, host_pages in by_host.items():
        plan = plans[host]
        if plan.refused:
            refused += [(p, ("host_blocked", plan.refused)) for p in host_pages]
            continue
        for index, page in enumerate(host_pages[: plan.granted]):
            now_pages.append(page)
            requests.append(build_request(project, page, start_at=plan.slot(index)))
        later += [(p, plan.retry_at) for p in host_pages[plan.granted :]]
    return now_pages, later, requests, {h: plan.in_flight for h, plan in plans.items()}


def build_request(project: Project, page: Page, *, start_at: float = 0.0) -> FetchRequest:
    """Project headers and cookies, the row's own request (a seed's or a spider's method, body,
    headers and cookies: its cookies join the project's), and conditional-GET validators."""
    own_headers, own_cookies = project_secrets_for(project, page.url)  # only to the project's own sites
    headers = {"User-Agent": user_agent_of(project), **own_headers}
    cookies = own_cookies | page.request.get("cookies", {})
    if cookies:
        headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
    headers |= page.request.get("headers", {})
    if page.etag:
        headers["If-None-Match"] = page.etag
    if page.last_modified:
        headers["If-Modified-Since"] = page.last_modified
    body = page.request.get("body")
    return FetchRequest(
        url=page.url,
        method=page.request.get("method", "GET"),
        headers=headers,
        body=body.encode() if body else None,
        start_at=start_at,
    )


def _record_backoffs(responses: list[FetchResponse]) -> dict:
    """Hosts that answered 429/503 with Retry-After: every worker holds back until then."""
    until = {}
    for response in responses:
        seconds = retry_after_seconds(response)
        if seconds:
            host = host_of(response.url)
            until[host] = host_back_off(host=host, seconds=seconds, status=response.status_code)
    return until


def _store_contents(pages, responses, verdicts: dict, written: set[int]) -> list[int]:
    """Store the bodies of the pages now `fetched` (in the transaction that finishes their lease);
    return their ids. A page whose lease was lost (the reaper gave it to another worker) keeps that
    worker's result."""
    fetched, contents = [], []
    for page in {p.id for p in verdicts} - written:
        log.warning("lease lost before writing page %s; result dropped", page, extra={"page_id": page})
    for page, response in zip(pages, responses, strict=True):
        if page.id in written and isinstance(verdicts[page], Fetched):
            fetched.append(page.id)
            contents.append(
                PageContent(page_id=page.id, headers=response.headers, body=zlib.compress(response.body, 3))
            )
    PageContent.objects.bulk_create(
        contents, update_conflicts=True, unique_fields=["page"], update_fields=["headers", "body"]
    )
    return fetched
