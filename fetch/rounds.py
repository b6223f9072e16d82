"""A fetch round: claim a batch, obey robots.txt and politeness, fetch concurrently, record each
result by compare-and-set on the lease. A wake-up runs one round (services.py), a fetch session
many at once (loop.py)."""

import concurrent.futures
import logging
import uuid
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import transaction
from django.utils import timezone
from structlog.contextvars import bound_contextvars

from core.canonical import origin_of, server_of
from core.masking import masked_url
from core.net.client import SLOT_MISSED, FetchRequest, FetchResponse, fetch_many, is_transient, runner
from crawl.frontier.pages import (
    page_never_given_up,
    pages_claim_for_fetch,
    pages_finish,
    pages_ready,
    pages_send_alone,
    pages_wait,
    pages_wake_when_due,
)
from crawl.frontier.stages import FETCH, job_scope
from crawl.frontier.verdicts import Fail, Fetched, Postpone, retry_or_fail
from crawl.hosts.answers import HostAnswer, hosts_record_answers
from crawl.hosts.claims import IDLE_RETRY_SECONDS, LATE_SECONDS, hosts_claim
from crawl.hosts.politeness import GRANT_AHEAD_SECONDS, hosts_learn_delays, hosts_note_failures, hosts_release
from crawl.hosts.robots_cache import robots_policies
from crawl.models import Page, PageContent, Project
from crawl.policy import allows_private, fetch_limits, user_agent_of
from crawl.services.projects import sitemaps_offer

from .blocks import blocks_judge, blocks_record
from .cookies import Session, session_save
from .outcomes import outcome
from .proxy_pool import (
    answers_record,
    pages_split_by_pool,
    pool_proxy_url,
    pool_verdict,
    proxies_by_session,
    proxy_pools,
)
from .rendering import render_all
from .requests import Signer, SignError, build_request, page_client, page_proxy, signed, signer_of
from .session_pool import SessionPool, pool_load, pool_record

log = logging.getLogger("crawlhub.fetch")


@transaction.atomic
def claim_round(page_ids: list[int], limit: int, render: bool, worker: str = "", *, ahead: float = 0.0):
    """One short transaction: pick the candidates, book their hosts' slots (hosts_claim), lease what
    may start now (or within `ahead` seconds: a fetch session's requests wait for their slots on its
    event loop, where waiting costs nothing), and give the others their hosts' next free slots."""
    due = timezone.now() + timedelta(seconds=ahead)
    if page_ids:
        queued = Page.objects.filter(id__in=page_ids, state=Page.State.QUEUED)  # another copy may have taken them
        candidates = list(queued.values_list("id", "project_id", "host"))
    else:
        candidates = pages_ready(limit=limit, render=render, due=due)
    claim = hosts_claim(candidates, ahead=ahead, urgent=_urgent)
    if not candidates:
        return claim.token, [], {}, False
    pages_wait(claim.waits)
    if page_ids:  # the reaper's pages go alone, by id: each not taken now is sent again for later
        later = {page_id for page_id, _, _ in candidates} - claim.now.keys()
        pages_send_alone(claim.retry_in(later, since=due))
    _, pages = pages_claim_for_fetch(list(claim.now), due=due, token=claim.token, worker=worker)
    return claim.token, pages, claim.grants, len(candidates) >= limit


def _urgent(page_ids: list[int]) -> set[int]:
    """The pages of positive priority among those waiting for their hosts: they go first."""
    return set(Page.objects.filter(id__in=page_ids, priority__gt=0).values_list("id", flat=True))


@dataclass
class FetchPart:
    """One host's pages of one project in a round, sent together and finished together, so a slow
    host holds only its own pages' leases."""

    project: Project
    host: str
    pages: list[Page] = field(default_factory=list)
    requests: list[FetchRequest] = field(default_factory=list)
    in_flight: int = 1
    pool: SessionPool | None = None  # the project's sessions; each request goes with one of them:
    sessions: list[Session | None] = field(default_factory=list)  # in the order of the pages
    proxy_pool: list = field(default_factory=list)  # the project's proxy pool (fetch/proxy_pool.py)
    proxies: list = field(default_factory=list)  # the proxy pool's proxy of each page (None: not the pool's)


@dataclass
class FetchRound:
    """The pages one claim took, as parts per host; the pages refused before any request (robots.txt,
    blocked hosts) are finished when the round is prepared."""

    token: uuid.UUID
    worker: str
    parts: list[FetchPart] = field(default_factory=list)
    fetched: Counter = field(default_factory=Counter)  # project id -> pages fetched, as parts finish
    finished: int = 0  # parts finished


def round_prepare(pages: list[Page], grants: dict, token, worker: str) -> FetchRound:
    """Robots.txt and the requests of the claimed pages, each at its slot, per host."""
    fetch_round, verdicts = FetchRound(token=token, worker=worker), []
    by_project = defaultdict(list)
    for page in pages:
        by_project[page.project_id].append(page)
    proxies_of = proxy_pools([project_pages[0].project for project_pages in by_project.values()])
    for project_pages in by_project.values():
        project, proxy_pool = project_pages[0].project, proxies_of.get(project_pages[0].project_id, [])
        allowed, refused, unreadable, learned = _split_by_robots(project_pages, project, pool_proxy_url(proxy_pool))
        held = hosts_note_failures(robots_unreadable=unreadable, unreachable=set())
        for page, (code, text) in refused:
            passing = code == "robots_unavailable" or is_transient(code)
            if page.host in held and passing and page_never_given_up(page):  # monitored: it waits, free
                verdicts.append((page, Postpone(code, f"{text}; the host is held back", held[page.host])))
            else:
                verdicts.append((page, retry_or_fail(code, text, {"fetched_by": worker})))
        allowed, waiting, proxy_of = pages_split_by_pool(proxy_pool, allowed)
        verdicts += waiting
        pool = pool_load(project, allowed) if allowed else None
        signer = signer_of(project) if allowed else None
        parts, blocked = _parts(project, allowed, grants, learned, pool, signer)
        if project.proxy_per_session and proxy_pool:
            proxy_of |= proxies_by_session(proxy_pool, parts)
        for part in parts:
            part.proxy_pool, part.proxies = proxy_pool, [proxy_of.get(page.id) for page in part.pages]
        fetch_round.parts += parts
        verdicts += blocked
    for job, job_verdicts in _by_job(verdicts).items():
        with job_scope(job), transaction.atomic():
            pages_finish(token=token, stage=FETCH, verdicts=job_verdicts)
    sending = {part.host for part in fetch_round.parts}
    idle = sorted({page.host for page in pages} - sending)
    if idle:  # every page of these hosts was refused before a request: their capacity goes back now
        hosts_release(token, hosts=idle)
    return fetch_round


def round_start(fetch_round: FetchRound, render: bool) -> list[tuple[FetchPart, concurrent.futures.Future]]:
    """Each part's responses, in order, as a future: every part's requests at once on this process's
    event loop (each project with its own client: its proxy and private-network setting); rendered
    pages one at a time in Chromium."""
    started = []
    for part in fetch_round.parts:
        if render:
            future = concurrent.futures.Future()
            pooled = [_url(proxy) for proxy in part.proxies]
            future.set_result(render_all(part.project, part.pages, part.requests, part.sessions, pooled))
        else:
            client = runner.client(allow_private=allows_private(part.project), proxy=part.project.proxy)
            for page, request, pooled in zip(part.pages, part.requests, part.proxies, strict=True):
                request.client = page_client(part.project, page, _url(pooled))  # a proxy of its own or its pool's
            future = runner.submit(
                fetch_many(
                    client,
                    part.requests,
                    limits=fetch_limits(),
                    concurrency=part.in_flight,
                    per_host={part.host: part.in_flight},
                )
            )
        started.append((part, future))
    return started


def parts_finish(done: list[tuple[FetchRound, FetchPart, concurrent.futures.Future]]) -> list[int]:
    """Finish the parts whose answers are in, together: free their hosts, then write each page's
    verdict while its lease holds, in one transaction per claim and job. A session finishes what
    came in while it was busy in one go, so a broad crawl (a page or two per host and part) costs a
    few statements per tick, not per page. Returns the ids now `fetched`."""
    answered = []
    try:
        for fetch_round, part, future in done:
            answered.append((fetch_round, part, future.result()))
    finally:
        for token, hosts in _hosts_by_token((r, p) for r, p, _ in done).items():
            hosts_release(token, hosts=hosts)
    pages = [page for _, part, _ in answered for page in part.pages]
    responses = [response for _, _, part_responses in answered for response in part_responses]
    blocks = blocks_judge(pages, responses)
    answers, reachable, failed = _answers_of(pages, responses, blocks)
    backoffs = hosts_record_answers(answers, reachable=reachable, unreachable=failed)
    blocks_record(pages, responses, blocks)
    _keep_sessions([(part, part_responses) for _, part, part_responses in answered])
    again = _record_sessions([(part, part_responses) for _, part, part_responses in answered], set(blocks))
    now_proxies = answers_record([(part, part_responses) for _, part, part_responses in answered], set(blocks))
    groups = defaultdict(list)  # (token, job) -> [(page, verdict)]
    for fetch_round, part, part_responses in answered:
        sent = zip(part.pages, part_responses, part.sessions, part.proxies, strict=True)
        for page, response, session, pooled in sent:
            blocked = blocks.get(page.id)  # a block page is counted as one, though its session is retired too
            verdict = (not blocked and again.get(page.id)) or _verdict(page, response, backoffs, fetch_round, blocked)
            verdict.fields["proxy"] = _proxy_shown(page, response, _url(pooled))
            verdict = pool_verdict(verdict, response, pooled, part.proxy_pool, now_proxies)
            if session is not None and session.owner_id is not None:
                verdict.fields["cookie_session_id"] = session.owner_id
            groups[(fetch_round.token, page.job_id)].append((page, verdict))
    responses_of = {page.id: response for page, response in zip(pages, responses, strict=True)}
    fetched = set()
    for (token, job), verdicts in groups.items():
        with job_scope(job), transaction.atomic():  # its warnings go to the job's log
            written = pages_finish(token=token, stage=FETCH, verdicts=verdicts)
            fetched |= set(_store_contents(verdicts, responses_of, written))
    for fetch_round, part, _ in answered:
        _log_when_done(fetch_round, part, sum(page.id in fetched for page in part.pages))
    return [page.id for page in pages if page.id in fetched]


def _hosts_by_token(parts) -> dict:
    hosts = defaultdict(list)
    for fetch_round, part in parts:
        hosts[fetch_round.token].append(part.host)
    return hosts


def _verdict(page: Page, response: FetchResponse, backoffs: dict, fetch_round: FetchRound, blocked=None):
    if response.error_code == SLOT_MISSED:
        return Postpone(SLOT_MISSED, "waiting for its host's next slot", timezone.now())
    verdict = outcome(page, response, backoffs.get(page.host), blocked)
    verdict.fields["fetched_by"] = fetch_round.worker
    return verdict


def _url(pooled) -> str:
    """A pool proxy's URL ("": none)."""
    return pooled.url if pooled is not None else ""


def _proxy_shown(page: Page, response: FetchResponse, pooled: str) -> str:
    """The proxy the page went through, as its row keeps it (password masked; "" when it was not sent)."""
    if response.error_code == SLOT_MISSED:
        return page.proxy
    return masked_url(page_proxy(page.project, page, pooled)[0])[:300]


def _by_job(verdicts: list) -> dict:
    """Verdicts by the job their page was claimed for (a wake-up serves every project's job)."""
    grouped = defaultdict(list)
    for page, verdict in verdicts:
        grouped[page.job_id].append((page, verdict))
    return grouped


def _log_when_done(fetch_round: FetchRound, part: FetchPart, fetched: int) -> None:
    """One line per project of the round, once its last part is written."""
    fetch_round.fetched[part.project.id] += fetched
    fetch_round.finished += 1
    if fetch_round.finished < len(fetch_round.parts):
        return
    for project_id, count in fetch_round.fetched.items():
        sent = sum(len(p.pages) for p in fetch_round.parts if p.project.id == project_id)
        with bound_contextvars(project_id=project_id, batch_size=sent):  # the log line names the project
            log.info("fetched %d of %d pages sent", count, sent)


def round_fetch(fetch_round: FetchRound, render: bool) -> list[int]:
    """Start the round and finish its parts as they are done (those done meanwhile together);
    returns the ids now `fetched`."""
    running = {future: part for part, future in round_start(fetch_round, render)}
    fetched = []
    while running:
        done, _ = concurrent.futures.wait(running, return_when="FIRST_COMPLETED")
        fetched += parts_finish([(fetch_round, running.pop(future), future) for future in done])
    return fetched


def wake_for_next(render: bool, *, claimed: bool) -> None:
    """Book the stage's next wake-up for when its next page is due (a little ahead, so its slot is
    booked in time). A claim that found nothing it could start waits a moment before looking again:
    what is due then waits for a host's connections, which a finishing batch frees."""
    pages_wake_when_due(render=render, early=GRANT_AHEAD_SECONDS, least=0.0 if claimed else IDLE_RETRY_SECONDS)


def _split_by_robots(pages: list[Page], project: Project, pooled: str = "") -> tuple[list[Page], list, set[str], dict]:
    """Pages robots.txt lets us fetch, (page, (error_code, message)) for the others, the hosts
    whose robots.txt could not be read, and {host: latest start of its first request} for hosts
    whose Crawl-delay was learned now (it is remembered for the claims that book their slots).
    robots.txt goes through `pooled` (a proxy of the project's pool), else the project's proxy."""
    if not project.obey_robots:
        return pages, [], set(), {}
    agent = user_agent_of(project)
    policies = robots_policies(
        {origin_of(p.url) for p in pages},
        allow_private=allows_private(project),
        user_agent=agent,
        proxy=pooled or project.proxy,
    )
    _offer_sitemaps(project, policies)
    allowed, refused, delays, unreadable = [], [], {}, set()
    for page in pages:
        policy = policies[origin_of(page.url)]
        delays[page.host] = policy.crawl_delay(agent)
        if policy.allows(page.url, agent, as_linked=page.linked_url):
            allowed.append(page)
        else:
            refused.append((page, policy.refusal()))
            if policy.unreadable(is_transient):
                unreadable.add(page.host)
    return allowed, refused, unreadable, hosts_learn_delays(delays)


def _offer_sitemaps(project: Project, policies: dict) -> None:
    urls = sorted({url for origin, policy in policies.items() for url in policy.sitemaps(f"{origin}/robots.txt")})
    if urls:
        sitemaps_offer(project=project, urls=urls)


def _parts(
    project: Project, pages: list[Page], grants: dict, learned: dict, pool: SessionPool | None, signer: Signer | None
) -> tuple[list[FetchPart], list]:
    """The pages sent now, per host, with their requests (each at its slot, signed by `signer` when
    the project has one), and the verdicts of pages whose host is blocked or whose signing failed.
    A host's first request, granted before its Crawl-delay was known (`learned`), must start before
    the slot the delay was counted from."""
    parts: dict[str, FetchPart] = {}
    blocked = []
    for page in pages:
        grant = grants[(page.host, project.id)]
        if grant.refused:
            blocked.append((page, retry_or_fail("host_blocked", grant.refused)))
            continue
        session = pool.pick(page)
        if session is None:  # no session of the pool can take it now
            blocked.append((page, pool.refusal(page)))
            continue
        part = parts.setdefault(
            page.host, FetchPart(project=project, host=page.host, in_flight=grant.in_flight, pool=pool)
        )
        request = build_request(project, page, start_at=grant.slot(len(part.pages)), session=session)
        if signer is not None:
            try:
                request = signed(signer, page, request)
            except SignError as exc:
                blocked.append((page, Fail("spider_error", str(exc)[:2000])))
                continue
        if grant.spacing:
            request.latest_start = request.start_at + LATE_SECONDS
        elif page.host in learned:
            request.latest_start = learned[page.host].timestamp()
        part.pages.append(page)
        part.requests.append(request)
        part.sessions.append(session)
    return list(parts.values()), blocked


UNREACHABLE = ("connect_error", "connect_timeout", "dns_error")


def _keep_sessions(answered: list[tuple[FetchPart, list[FetchResponse]]]) -> None:
    """The cookies the parts' answers set join their projects' sessions, for every worker's next requests."""
    kept = {}
    for part, responses in answered:
        for page, response, session in zip(part.pages, responses, part.sessions, strict=True):
            if session is not None:
                session.keep(page.url, response.set_cookies)
                kept[id(session)] = session
    for session in kept.values():
        session_save(session)


def _record_sessions(answered: list[tuple[FetchPart, list[FetchResponse]]], blocked: set[int]) -> dict:
    """What the answers say of the sessions they were sent with (session_pool.pool_record; a block
    page, by page id in `blocked`, spends its session): the verdicts of the pages whose answer
    spent their session, tried again with another."""
    return pool_record(
        [
            (part.pool, page, session, response)
            for part, responses in answered
            if part.pool is not None
            for page, session, response in zip(part.pages, part.sessions, responses, strict=True)
            if response.error_code != SLOT_MISSED
        ],
        blocked=blocked,
    )


def _answers_of(
    pages: list[Page], responses: list[FetchResponse], blocked: dict
) -> tuple[list[HostAnswer], set[str], set[str]]:
    """What the hosts answered, for hosts_record_answers: each response's answer (a block page,
    by page id in `blocked`, slows its host down like a 429), the hosts that answered at all, and
    those none of whose requests got through."""
    reachable, failed = set(), set()
    for page, response in zip(pages, responses, strict=True):
        if response.status_code is not None:
            reachable.add(page.host)
        elif response.error_code in UNREACHABLE:
            failed.add(page.host)
    answers = [
        HostAnswer(
            server_of(r.url),
            r.status_code,
            r.headers.get("retry-after", ""),
            blocked=blocked[page.id].rule if page.id in blocked else "",
        )
        for page, r in zip(pages, responses, strict=True)
    ]
    return answers, reachable, failed


def _store_contents(verdicts: list, responses: dict[int, FetchResponse], written: set[int]) -> list[int]:
    """Store the bodies of the pages now `fetched` (in the transaction that finishes their lease);
    return their ids. A page whose lease was lost (the reaper gave it to another worker) keeps that
    worker's result."""
    fetched, contents = [], []
    for page, _ in verdicts:
        if page.id not in written:
            log.warning("lease lost before writing page %s; result dropped", page.id, extra={"page_id": page.id})
    for page, verdict in verdicts:
        if page.id in written and isinstance(verdict, Fetched):
            response = responses[page.id]
            fetched.append(page.id)
            contents.append(
                PageContent(page_id=page.id, headers=response.headers, body=zlib.compress(response.body, 3))
            )
    PageContent.objects.bulk_create(
        contents, update_conflicts=True, unique_fields=["page"], update_fields=["headers", "body"]
    )
    return fetched
