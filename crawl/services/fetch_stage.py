"""The fetch stage: claim a batch, obey robots.txt and politeness, fetch concurrently, record each
result by compare-and-set on the lease."""

import concurrent.futures
import logging
import time
import uuid
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone
from structlog.contextvars import bound_contextvars

from core.canonical import origin_of, server_of
from core.net.client import (
    SLOT_MISSED,
    FetchRequest,
    FetchResponse,
    RenderRequest,
    fetch_many,
    is_transient,
    retry_after_seconds,
    runner,
)
from crawl.frontier.pages import (
    backlog_recount,
    page_never_given_up,
    pages_claim_for_fetch,
    pages_finish,
    pages_ready,
    pages_send_alone,
    pages_wait,
    pages_wake_when_due,
)
from crawl.frontier.stages import FETCH, RENDER, job_scope, wake_stage
from crawl.frontier.verdicts import Fail, Fetched, Postpone, retry_or_fail
from crawl.frontier.wakeups import wakeup_taken
from crawl.models import Page, PageContent, Project
from crawl.policy import allows_private, fetch_limits, user_agent_of
from crawl.services.blocks import blocks_judge, blocks_record
from crawl.services.credentials import project_secrets_for
from crawl.services.outcomes import outcome
from crawl.services.politeness import (
    GRANT_AHEAD_SECONDS,
    SLOT_MARGIN,
    HostGrant,
    host_back_off,
    hosts_answered,
    hosts_grant,
    hosts_learn_delays,
    hosts_note_failures,
    hosts_release,
    hosts_throttle,
)
from crawl.services.projects import sitemaps_offer
from crawl.services.rendering import render_page
from crawl.services.request_options import Signer, SignError, page_client, page_proxy, signed, signer_of
from crawl.services.robots_cache import robots_policies
from crawl.services.session_pool import SessionPool, pool_load, pool_record
from crawl.services.sessions import Session, request_cookies, session_save
from crawlproject.queues import STAGES

log = logging.getLogger("crawlhub.fetch")
IDLE_RETRY_SECONDS = 0.2
# A request later than this past its slot is not sent (it waits for another): with the slots' margin
# this keeps two requests to a host at least the delay apart however late a batch runs. It is
# checked when the request's connection is ready to write (core.net.transport.send_deadline), so the
# rest of the margin only covers the moment from there to the wire.
LATE_SECONDS = SLOT_MARGIN * 0.8


def pages_fetch(*, page_ids: list[int], worker: str = "", render: bool = False, wake: str | None = None) -> list[int]:
    """Claim the pages that are ready now across hosts and projects (in headless Chromium when
    `render`), fetch them all at once, and record each result; return the ids now `fetched` (the
    frontier hands them to the extract stage). `page_ids`: exactly those pages (the reaper's, one
    at a time); empty: a wake-up (booked for `wake`, an ISO time), which takes whatever is ready,
    and, when no other process of the worker does, keeps taking it for a while (fetch_session.py).
    Outside a session a claim books no slot ahead, so no process waits for one: a polite host's
    later slots are the session's."""
    queue = RENDER if render else FETCH
    if wake:
        wakeup_taken(queue, datetime.fromisoformat(wake))
        backlog_recount()  # an extract batch that resumed fetching sent this wake-up: look again now
    if not page_ids and not render:
        from crawl.services.fetch_session import session_run  # it drives this module's rounds

        fetched = session_run(worker)
        if fetched is not None:
            return fetched
    limit = STAGES[RENDER if render else FETCH].batch()
    token, pages, grants, full = claim_round(page_ids, limit, render, worker)
    if full:  # more may be ready: another worker process claims it while this one fetches
        wake_stage(queue)
    fetched = round_fetch(round_prepare(pages, grants, token, worker), render) if pages else []
    wake_for_next(render, claimed=bool(pages))
    return fetched


@transaction.atomic
def claim_round(page_ids: list[int], limit: int, render: bool, worker: str = "", *, ahead: float = 0.0):
    """One short transaction: pick the candidates, book their hosts' slots, lease what may start
    now (or within `ahead` seconds: a fetch session's requests wait for their slots on its event
    loop, where waiting costs nothing), and give the others their hosts' next free slots."""
    due = timezone.now() + timedelta(seconds=ahead)
    if page_ids:
        queued = Page.objects.filter(id__in=page_ids, state=Page.State.QUEUED)  # another copy may have taken them
        candidates = list(queued.values_list("id", "project_id", "host"))
    else:
        candidates = pages_ready(limit=limit, render=render, due=due)
    token = uuid.uuid4()
    if not candidates:
        return token, [], {}, False
    projects = Project.objects.in_bulk({project_id for _, project_id, _ in candidates})
    wanted = Counter((host, project_id) for _, project_id, host in candidates)
    grants = hosts_grant(wanted=wanted, projects=projects, token=token, ahead=ahead)
    now_ids, waiting, taken = [], [], Counter()
    for page_id, project_id, host in candidates:
        grant, index = grants[(host, project_id)], taken[(host, project_id)]
        taken[(host, project_id)] += 1
        if grant.refused or index < grant.granted:
            now_ids.append(page_id)
        elif grant.later is not None:
            waiting.append((page_id, grant))
    waits = _wait_slots(waiting)
    pages_wait(waits)
    if page_ids:  # the reaper's pages go alone, by id: each not taken now is sent again for later
        later = {page_id for page_id, _, _ in candidates} - set(now_ids)
        pages_send_alone(
            {
                i: max(IDLE_RETRY_SECONDS, (waits[i] - due).total_seconds()) if i in waits else IDLE_RETRY_SECONDS
                for i in later
            }
        )
    _, pages = pages_claim_for_fetch(now_ids, due=due, token=token, worker=worker)
    return token, pages, grants, len(candidates) >= limit


def _wait_slots(waiting: list[tuple[int, HostGrant]]) -> dict[int, datetime]:
    """When each page that waits for its host starts. A page of positive priority takes its host's
    next free slot, ahead of the pages already waiting there (a page whose slot it takes is given
    the host's last one when both come due: the claim then takes the higher priority first); the
    others queue behind the pages already waiting."""
    ids = [page_id for page_id, _ in waiting]
    urgent = set(Page.objects.filter(id__in=ids, priority__gt=0).values_list("id", flat=True)) if ids else set()
    ahead, behind, starts = Counter(), Counter(), {}
    for page_id, grant in waiting:
        if page_id in urgent:
            starts[page_id] = grant.free_slot(ahead[grant.host])
            ahead[grant.host] += 1
        else:
            starts[page_id] = grant.waits(behind[grant.host] + 1)[-1]
            behind[grant.host] += 1
    return starts


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
    for project_pages in by_project.values():
        project = project_pages[0].project
        allowed, refused, unreadable, learned = _split_by_robots(project_pages, project)
        held = hosts_note_failures(robots_unreadable=unreadable, unreachable=set())
        for page, (code, text) in refused:
            passing = code == "robots_unavailable" or is_transient(code)
            if page.host in held and passing and page_never_given_up(page):  # monitored: it waits, free
                verdicts.append((page, Postpone(code, f"{text}; the host is held back", held[page.host])))
            else:
                verdicts.append((page, retry_or_fail(code, text, {"fetched_by": worker})))
        pool = pool_load(project, allowed) if allowed else None
        signer = signer_of(project) if allowed else None
        parts, blocked = _parts(project, allowed, grants, learned, pool, signer)
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
            future.set_result(_render_all(part))
        else:
            client = runner.client(allow_private=allows_private(part.project), proxy=part.project.proxy)
            for page, request in zip(part.pages, part.requests, strict=True):
                request.client = page_client(part.project, page)  # a proxy of the request's own
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
    backoffs = _record_answers(pages, responses, blocks)
    blocks_record(pages, responses, blocks)
    _keep_sessions([(part, part_responses) for _, part, part_responses in answered])
    again = _record_sessions([(part, part_responses) for _, part, part_responses in answered], set(blocks))
    groups = defaultdict(list)  # (token, job) -> [(page, verdict)]
    for fetch_round, part, part_responses in answered:
        for page, response, session in zip(part.pages, part_responses, part.sessions, strict=True):
            blocked = blocks.get(page.id)  # a block page is counted as one, though its session is retired too
            verdict = (not blocked and again.get(page.id)) or _verdict(page, response, backoffs, fetch_round, blocked)
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


def _render_all(part: FetchPart) -> list[FetchResponse]:
    """One page at a time in this process's headless Chromium, each at its politeness slot, with
    what its request carries (method, body, headers, cookies, validators) and the session."""
    project = part.project
    agent, private = user_agent_of(project), allows_private(project)
    responses = []
    for page, request, session in zip(part.pages, part.requests, part.sessions, strict=True):
        time.sleep(max(0.0, request.start_at - time.time()))
        rendered = render_request(project, page, session, built=request)
        proxy, private_proxy = page_proxy(project, page)
        response = render_page(
            request.url,
            allow_private=private,
            user_agent=agent,
            proxy=proxy,
            private_proxy=private_proxy,
            request=rendered,
            timeout=request.timeout,
        )
        if session is not None:
            configured = [c for c in rendered.cookies if c not in rendered.session_cookies]
            session.keep_browser(page.url, rendered.session_cookies, response.browser_cookies, configured)
        responses.append(response)
    return responses


def render_request(
    project: Project, page: Page, session: Session | None = None, *, built: FetchRequest | None = None
) -> RenderRequest:
    """What build_request sends (or `built`, the request the round built and signed), for Chromium:
    the cookies (the project's, the session's and the row's own) go into the browser, whose cookie
    rules send them; the rest goes with the page's first request."""
    fetch_request = built or build_request(project, page)
    headers = {k: v for k, v in fetch_request.headers.items() if k.lower() not in ("cookie", "user-agent")}
    own_cookies = project_secrets_for(project, page.url)[1] | page.request.get("cookies", {})
    session_cookies = session.browser_cookies(page.url) if session is not None else []
    return RenderRequest(
        method=fetch_request.method,
        headers=headers,
        body=fetch_request.body,
        cookies=session_cookies + request_cookies(page.url, own_cookies),
        session_cookies=session_cookies,
    )


def _split_by_robots(pages: list[Page], project: Project) -> tuple[list[Page], list, set[str], dict]:
    """Pages robots.txt lets us fetch, (page, (error_code, message)) for the others, the hosts
    whose robots.txt could not be read, and {host: latest start of its first request} for hosts
    whose Crawl-delay was learned now (it is remembered for the claims that book their slots)."""
    if not project.obey_robots:
        return pages, [], set(), {}
    agent = user_agent_of(project)
    policies = robots_policies(
        {origin_of(p.url) for p in pages}, allow_private=allows_private(project), user_agent=agent, proxy=project.proxy
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


def build_request(
    project: Project, page: Page, *, start_at: float = 0.0, session: Session | None = None
) -> FetchRequest:
    """Project headers and cookies, the session's cookies for this URL, the row's own request (a
    seed's or a spider's method, body, headers and cookies: its cookies join the others), and
    conditional-GET validators."""
    own_headers, own_cookies = project_secrets_for(project, page.url)  # only to the project's own sites
    headers = {"User-Agent": user_agent_of(project), **own_headers}
    session_cookies = session.header_for(page.url) if session is not None else {}
    cookies = own_cookies | session_cookies | page.request.get("cookies", {})
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
        timeout=page.request.get("timeout"),
    )


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


def _record_answers(pages: list[Page], responses: list[FetchResponse], blocked: dict) -> dict:
    """What the hosts answered. Hosts that answered 429/503: with Retry-After every worker holds
    back until then; without (or with a block page: `blocked`, by page id), the host's adaptive
    delay grows (and shrinks again as it answers).
    Hosts none of whose requests got through count a failure in a row; those that answered start
    again from none. Returns {host: held until}."""
    until, throttled, normal, reachable, failed = {}, {}, set(), set(), set()
    for page, response in zip(pages, responses, strict=True):
        if response.status_code is not None:
            reachable.add(page.host)
        elif response.error_code in UNREACHABLE:
            failed.add(page.host)
        host, seconds = server_of(response.url), retry_after_seconds(response)
        if seconds:
            until[host] = host_back_off(host=host, seconds=seconds, status=response.status_code)
        elif page.id in blocked:
            throttled[host] = f"a block page (rule '{blocked[page.id].rule}')"
        elif response.status_code in (429, 503):
            throttled[host] = f"HTTP {response.status_code} without Retry-After"
        elif response.status_code is not None and response.status_code < 400:
            normal.add(host)
    hosts_answered(reachable=reachable, unthrottled=normal - throttled.keys())
    hosts_note_failures(robots_unreadable=set(), unreachable=failed - reachable)
    return until | hosts_throttle(slowed=set(throttled), reasons=throttled)


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
