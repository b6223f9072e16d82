"""A project's proxy pool: which proxy each page of a batch goes through, and what each answer says of
its proxy.

Proxies take the pages in turn (least recently used first), never one that rests; a request with a
`session_key` keeps to its session's proxy. A proxy that spoils CRAWL_PROXY_ERRORS_TO_REST answers
in a row (errors, or blocks: answers the block detector judged blocked, or `proxy_outcome`) rests, then is tried
again with one page; a good answer puts it back in service, another failure rests it twice as long.
When every proxy rests, the pages wait (they never go out without one). Its health is written
under a row lock, one short transaction per proxy and batch, so workers never lose each other's counts."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.masking import masked_secrets, url_secrets
from core.proxyhealth import BLOCKED, Candidate, Health, RestRules, after, in_turn, outcome_of, proxy_fault
from crawl.frontier.verdicts import Postpone, Retry
from crawl.models import Page, Project, ProjectProxy
from crawl.policy import project_snapshot

RESTING = "proxy_resting"  # the code of a page that waits for its pool


@dataclass
class PoolPick:
    """The proxy of each page (None: the page's own, or none), and when every proxy rests, the time
    the pool's first one is back (the pages wait until then)."""

    proxies: list[ProjectProxy | None] = field(default_factory=list)
    back_at: datetime | None = None


def rest_rules() -> RestRules:
    return RestRules(
        settings.CRAWL_PROXY_ERRORS_TO_REST, settings.CRAWL_PROXY_REST_SECONDS, settings.CRAWL_PROXY_MAX_REST_SECONDS
    )


def proxy_pools(projects: list[Project]) -> dict[int, list[ProjectProxy]]:
    """The active proxies of each project that has some, least recently used first (one query; none
    when no project has a pool: whether it has one is kept per process until its change stamp moves,
    and adding, editing or deleting a proxy moves it: crawl/signals.py)."""
    pools: dict[int, list[ProjectProxy]] = {}
    project_ids = [project.id for project in projects if project_snapshot(project, "has_proxies", _has_proxies)]
    if not project_ids:
        return pools
    rows = ProjectProxy.objects.filter(project_id__in=project_ids, active=True)
    for proxy in rows.order_by(F("last_used_at").asc(nulls_first=True), "id"):
        pools.setdefault(proxy.project_id, []).append(proxy)
    return pools


def _has_proxies(project: Project) -> bool:
    return ProjectProxy.objects.filter(project_id=project.id, active=True).exists()


def proxy_state(proxy: ProjectProxy, now: datetime | None = None) -> str:
    """off, resting, on trial (back from a rest, not yet answered well) or in service."""
    now = now or timezone.now()
    if not proxy.active:
        return "off"
    if proxy.rested_until and proxy.rested_until > now:
        return "resting"
    return "on trial" if proxy.rests_in_row else "in service"


def proxies_pick(*, pool: list[ProjectProxy], pages: list[Page], session_keys: list[str | None] | None = None):
    """The pool's proxy for each page (a page whose request names its own proxy keeps it), marked
    used now in the order they were given, so the next batch starts with the others."""
    now = timezone.now()
    pooled = [i for i, page in enumerate(pages) if not page.request.get("proxy")]
    if not pool or not pooled:
        return PoolPick([None] * len(pages))
    states = [proxy_state(p, now) for p in pool]
    # keyed by id: a session's proxy (rendezvous hashing on the key) is the same whatever the pool's order
    candidates = [
        Candidate(p.id, state != "resting", state == "on trial") for p, state in zip(pool, states, strict=True)
    ]
    keys = [session_keys[i] for i in pooled] if session_keys else None
    chosen = in_turn(candidates, [pages[i].attempts for i in pooled], keys)
    if chosen and chosen[0] is None:
        return PoolPick([None] * len(pages), back_at=min(p.rested_until for p in pool))
    picked: list[ProjectProxy | None] = [None] * len(pages)
    by_id = {proxy.id: proxy for proxy in pool}
    for index, key in zip(pooled, chosen, strict=True):
        picked[index] = by_id[key]
    _mark_used(picked, now)
    return PoolPick(picked)


def _mark_used(picked: list[ProjectProxy | None], now: datetime) -> None:
    order = list(dict.fromkeys(p for p in picked if p is not None))
    for step, proxy in enumerate(order):
        proxy.last_used_at = now + timedelta(microseconds=step)
    ProjectProxy.objects.bulk_update(order, ["last_used_at"])


def pool_proxy_url(pool: list[ProjectProxy]) -> str:
    """The proxy for a project's other requests of a batch (robots.txt): the pool's next in service,
    else the one back first (they never go out without one)."""
    now = timezone.now()
    serving = [p for p in pool if proxy_state(p, now) != "resting"]
    return (serving or sorted(pool, key=lambda p: p.rested_until))[0].url if pool else ""


def proxy_outcome(proxy: ProjectProxy | int, outcome: str, latency: float | None = None, error: str = ""):
    """Record what one answer through `proxy` said of it: ok, error or blocked (the block detector's
    word), `latency` in seconds; returns the proxy as it is now."""
    proxy_id = proxy if isinstance(proxy, int) else proxy.id
    return proxies_record([(proxy_id, outcome, latency, error)])[proxy_id]


def proxies_record(outcomes: list[tuple[int, str, float | None, str]]) -> dict[int, ProjectProxy]:
    """Record a batch's outcomes, (proxy id, outcome, latency in seconds, error text): one short
    transaction per proxy, its row locked. Returns the proxies as they are now."""
    by_proxy: dict[int, list] = {}
    for proxy_id, *rest in outcomes:
        by_proxy.setdefault(proxy_id, []).append(rest)
    return {proxy_id: _record(proxy_id, seen) for proxy_id, seen in sorted(by_proxy.items())}


@transaction.atomic
def _record(proxy_id: int, outcomes: list) -> ProjectProxy:
    proxy = ProjectProxy.objects.select_for_update().get(id=proxy_id)
    health, rules = Health(proxy.score, proxy.latency_ms, proxy.errors_in_row, proxy.rests_in_row), rest_rules()
    for outcome, latency, error in outcomes:
        now = timezone.now()
        resting = proxy.rested_until is not None and proxy.rested_until > now
        health, rest = after(health, outcome, None if latency is None else latency * 1000, resting=resting, rules=rules)
        proxy.uses += 1
        proxy.errors += outcome == "error"
        proxy.blocks += outcome == "blocked"
        if error:
            proxy.last_error = masked_secrets(error, url_secrets(proxy.url))[:300]
        if rest:
            proxy.rested_until = now + timedelta(seconds=rest)
    proxy.score, proxy.latency_ms = health.score, health.latency_ms
    proxy.errors_in_row, proxy.rests_in_row = health.errors_in_row, health.rests_in_row
    proxy.save(update_fields=[*_HEALTH_FIELDS])
    return proxy


_HEALTH_FIELDS = ("score", "latency_ms", "uses", "errors", "blocks", "errors_in_row", "rests_in_row")
_HEALTH_FIELDS += ("rested_until", "last_error")


def proxy_back_in_service(*, proxies) -> int:
    """End the rests of `proxies` now (an operator knows the proxy is fixed); returns how many."""
    return proxies.update(rested_until=None, errors_in_row=0, rests_in_row=0)


# --- The fetch stage's side ---------------------------------------------------------------------


def pages_split_by_pool(pool: list[ProjectProxy], pages: list[Page], session_keys: list[str | None] | None = None):
    """(the pages sent now, the verdicts of those that wait for a resting pool, {page id: its pool
    proxy}) for one project's pages of a batch (`session_keys`: each page's session, if any)."""
    pick = proxies_pick(pool=pool, pages=pages, session_keys=session_keys)
    if pick.back_at is None:
        return pages, [], {page.id: proxy for page, proxy in zip(pages, pick.proxies, strict=True)}
    waiting = Postpone(RESTING, "every proxy of the project rests; it is tried again then", pick.back_at)
    return [], [(page, waiting) for page in pages], {}


def proxies_by_session(pool: list[ProjectProxy], parts) -> dict[int, ProjectProxy]:
    """{page id: its proxy} for the pages of `parts` (each with its `sessions`), each session's pages
    through the one proxy its key picks (a project's `proxy_per_session`): a site that ties a login
    to an address sees each session from one. A resting pool keeps the picks made before."""
    pages = [page for part in parts for page in part.pages]
    keys = [_session_key(session) for part in parts for session in part.sessions]
    pick = proxies_pick(pool=pool, pages=pages, session_keys=keys)
    if pick.back_at is not None:
        return {}
    return {page.id: proxy for page, proxy in zip(pages, pick.proxies, strict=True) if proxy is not None}


def _session_key(session) -> str | None:
    return None if session is None or session.owner_id is None else f"session-{session.owner_id}"


def answers_record(answered, blocked: set[int] = frozenset()) -> dict[int, ProjectProxy]:
    """What the parts' answers say of their pool proxies (`answered`: (part, responses) pairs, each
    part with its pages' `proxies`; `blocked`: the ids of the pages the block detector judged
    blocked, a block against their proxy); returns those proxies as they are now."""
    outcomes = []
    for part, responses in answered:
        for page, proxy, response in zip(part.pages, part.proxies, responses, strict=True):
            if proxy is None:
                continue
            seen = outcome_of(response.status_code, response.error_code, response.headers)
            seen = BLOCKED if page.id in blocked and seen is not None else seen
            if seen is not None:
                error = response.error_message or (f"HTTP {response.status_code}" if seen == "error" else "")
                outcomes.append((proxy.id, seen, response.elapsed, error))
    return proxies_record(outcomes) if outcomes else {}


def pool_verdict(verdict, response, pooled: ProjectProxy | None, pool: list[ProjectProxy], now_proxies: dict):
    """A page whose pool proxy failed for sure (not the site: core.proxyhealth.proxy_fault) goes again
    through another, without spending an attempt, while another proxy of the pool serves."""
    if pooled is None or not isinstance(verdict, Retry):
        return verdict
    if not proxy_fault(response.status_code, response.error_code, response.headers):
        return verdict
    now = timezone.now()
    others = [now_proxies.get(p.id, p) for p in pool if p.id != pooled.id]
    if not any(proxy_state(p, now) != "resting" for p in others):
        return verdict
    message = f"{verdict.message} (through the proxy {pooled.shown_url}; sent again through another)"
    return Postpone(verdict.code, message, now, verdict.fields)
