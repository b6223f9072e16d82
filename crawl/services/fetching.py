"""The fetch stage: claim a batch, obey robots.txt, fetch concurrently, record each result by CAS."""

import hashlib
import logging
import zlib
from collections import defaultdict
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from crawl.fetcher import FetchLimits, FetchResponse, fetch_many, is_transient, runner
from crawl.models import Page, PageContent, Project
from crawl.urls import origin_of

from .frontier import page_finish, pages_claim_for_fetch
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


def pages_fetch(*, page_ids: list[int], worker: str = "") -> list[int]:
    """Fetch the claimable pages among page_ids; return the ids now `fetched` (ready to extract)."""
    token, pages = pages_claim_for_fetch(page_ids)
    by_project = defaultdict(list)
    for page in pages:
        by_project[page.project_id].append(page)
    fetched = []
    for project_pages in by_project.values():
        fetched += _fetch_project_pages(project_pages, token, worker)
    return fetched


def _fetch_project_pages(pages: list[Page], token, worker: str) -> list[int]:
    project = pages[0].project
    agent, private = user_agent_of(project), allows_private(project)
    allowed, refused = _split_by_robots(pages, project, agent, private)
    client = runner.client(allow_private=private)
    responses = runner.run(
        fetch_many(
            client,
            [p.url for p in allowed],
            headers={"User-Agent": agent},
            limits=fetch_limits(),
            concurrency=project.concurrency,
        )
    )
    with transaction.atomic():
        for page, (code, message) in refused:
            changes = _failure(page, code, message) | {"fetched_by": worker}
            page_finish(page_id=page.id, token=token, from_state=Page.State.LEASED, **changes)
        return _record_responses(allowed, responses, token, worker)


def _split_by_robots(pages, project, agent, private) -> tuple[list[Page], list]:
    """Pages robots.txt lets us fetch, and (page, (error_code, message)) for the others."""
    if not project.obey_robots:
        return pages, []
    policies = robots_policies({origin_of(p.url) for p in pages}, allow_private=private, user_agent=agent)
    allowed, refused = [], []
    for page in pages:
        policy = policies[origin_of(page.url)]
        if policy.allows(page.url, agent):
            allowed.append(page)
        else:
            refused.append((page, policy.refusal()))
    return allowed, refused


def _record_responses(pages: list[Page], responses: list[FetchResponse], token, worker: str) -> list[int]:
    fetched, contents = [], []
    for page, response in zip(pages, responses, strict=True):
        changes = _outcome(page, response)
        changes["fetched_by"] = worker
        if page_finish(page_id=page.id, token=token, from_state=Page.State.LEASED, **changes):
            if changes["state"] == Page.State.FETCHED:
                fetched.append(page.id)
                contents.append(
                    PageContent(page_id=page.id, headers=response.headers, body=zlib.compress(response.body, 3))
                )
        else:
            log.warning("lease lost before writing page %s; result dropped", page.id)
    PageContent.objects.bulk_create(
        contents, update_conflicts=True, unique_fields=["page"], update_fields=["headers", "body"]
    )
    return fetched


def _outcome(page: Page, response: FetchResponse) -> dict:
    """The row changes for one fetch result: fetched, retried later, or failed."""
    now = timezone.now()
    base = {"fetched_at": now, "status_code": response.status_code, "error_code": "", "error_message": ""}
    if response.status_code is not None:
        base["content_type"] = response.content_type[:200]
        base["final_url"] = response.location or page.url
    code, message = _error_of(response)
    if not code:
        return base | {
            "state": Page.State.FETCHED,
            "enqueued_at": now,
            "content_length": len(response.body),
            "content_sha256": _sha256(response.body),
        }
    return base | _failure(page, code, message)


def _failure(page: Page, code: str, message: str) -> dict:
    """Transient errors go back to the queue with backoff until attempts run out; others fail now."""
    changes = {"error_code": code, "error_message": message[:2000]}
    retryable = is_transient(code) or code == "robots_unavailable"
    if retryable and page.attempts < settings.CRAWL_MAX_ATTEMPTS:
        retry_at = timezone.now() + _backoff(page.attempts)
        return changes | {"state": Page.State.QUEUED, "enqueued_at": None, "next_fetch_at": retry_at}
    return changes | {"state": Page.State.FAILED}


def _error_of(response: FetchResponse) -> tuple[str, str]:
    if response.error_code:
        return response.error_code, response.error_message
    status = response.status_code
    if status >= 400:
        return f"http_{status}", f"HTTP {status}"
    if 300 <= status < 400 and not response.location:
        return "bad_redirect", f"HTTP {status} without a Location header"
    return "", ""


def _backoff(attempts: int) -> timedelta:
    return timedelta(seconds=min(3600, settings.CRAWL_RETRY_BASE_SECONDS * 2 ** max(0, attempts - 1)))


def _sha256(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()
