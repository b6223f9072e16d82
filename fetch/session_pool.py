"""A project's pool of cookie sessions (Crawlee's SessionPool idea): `session_pool_size` sessions,
each with its own cookies, taking turns (the least used ready one goes next), one pool per host when
the project pins them (`session_per_host`). A new session logs in first when the project names a
login page: its own row of that page, whose requests (the spider's login route) are its own too,
until one that is not the login page is answered well. A session that is blocked, sent back to the
login page, past its uses or its errors, is retired (its cookies deleted) and a new one takes its
place. The fetch stage asks `pool_load` for a round's pool and tells `pool_record` the answers.
"""

import contextlib
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import DatabaseError
from django.db.models import F, Q
from django.utils import timezone

from core.batchsql import insert_new_ids
from core.masking import masked_url
from core.net.client import FetchResponse, is_transient
from crawl.frontier.discovery import requests_enqueue, seed_request
from crawl.frontier.verdicts import Done, Link, Postpone
from crawl.models import CookieSession, Page, Project, Seed, SessionCookie
from crawl.session_rules import BLOCKED, ERROR, EXPIRED, OK, SessionRules, statuses_of

from .cookies import Session, pool_sessions_load, session_load

READY, LOGGING_IN, RETIRED = CookieSession.State.READY, CookieSession.State.LOGGING_IN, CookieSession.State.RETIRED
LOGIN_PRIORITY = 1000  # a login goes before the pages that wait for it
LOGIN_PATIENCE_SECONDS = 300.0  # a login not done by then is given up: another session logs in
WAIT_SECONDS = 1.0  # a page without a ready session, or whose session was spent, looks again this soon
COUNT_EVERY_SECONDS = 5.0  # a process writes its sessions' uses at most this often (_count)


@dataclass
class SessionPool:
    """The live sessions a round's pages may use, with their cookie jars."""

    project: Project
    rules: SessionRules
    members: dict[int, CookieSession] = field(default_factory=dict)
    jars: dict[int, Session] = field(default_factory=dict)
    assigned: Counter = field(default_factory=Counter)  # session id -> requests given it in this round

    def pick(self, page: Page) -> Session | None:
        """The session `page` is sent with: its own (a login's request), else the ready session of its
        host's pool used least; None when none may take it now (refusal() says why)."""
        if not self.project.keep_cookies:
            return Session(project=self.project, enabled=False)
        if "session" in page.request:
            return self.jars.get(page.request["session"])
        pool_host = page.host if self.project.session_per_host else ""
        ready = [m for m in self.members.values() if m.state == READY and m.host == pool_host]
        if not ready:
            return None
        chosen = min(ready, key=lambda m: (m.uses + self.assigned[m.id], m.slot))
        self.assigned[chosen.id] += 1
        return self.jars[chosen.id]

    def refusal(self, page: Page) -> Done | Postpone:
        """The verdict of a page pick() gave no session: a login of a retired session is not needed
        any more; another page waits for a session to be ready."""
        if "session" in page.request:
            return Done({}, revisit_seconds=None)
        return Postpone("session_wait", "waiting for a logged-in session", _soon())


def pool_rules(project: Project) -> SessionRules:
    return SessionRules(
        login_url=project.session_login_url,
        expired_selector=project.session_expired_selector,
        retire_statuses=statuses_of(project.session_retire_statuses),
    )


def pool_load(project: Project, pages: list[Page]) -> SessionPool:
    """The pool for a round of the project's `pages`: its live sessions (filled up to the pool's
    size, new ones set to log in; a login that took too long is given up) and their cookies."""
    pool = SessionPool(project=project, rules=pool_rules(project))
    if not project.keep_cookies or project.pk is None:
        return pool
    hosts = {page.host for page in pages} if project.session_per_host else {""}
    pinned = {page.request["session"] for page in pages if "session" in page.request}
    wanted = Q(host__in=hosts) | Q(id__in=pinned)
    members, jars = pool_sessions_load(project, wanted)  # one query: the sessions and their cookies
    if _refresh(project, hosts, members):
        members, jars = pool_sessions_load(project, wanted)
    pool.members, pool.jars = {m.id: m for m in members}, jars
    return pool


def _refresh(project: Project, hosts: set[str], members: list[CookieSession]) -> bool:
    """Retire the sessions past the pool's size and the logins given up, and fill each host's pool up
    to its size; True when something changed."""
    late = timezone.now() - timedelta(seconds=LOGIN_PATIENCE_SECONDS)
    size, gone = project.session_pool_size, set()
    for member in members:
        if member.slot >= size:
            why = "the pool is smaller now"
        elif member.state == LOGGING_IN and member.created_at < late:
            why = "its login was not done in time"
        else:
            continue
        if session_retire(session=member, reason=why):
            gone.add(member.id)
    taken = {(m.host, m.slot) for m in members if m.id not in gone}
    state = LOGGING_IN if project.session_login_url else READY
    new = [
        CookieSession(project=project, host=host, slot=slot, state=state)
        for host in sorted(hosts)
        for slot in range(size)
        if (host, slot) not in taken
    ]
    if new:
        insert_new_ids(CookieSession, new, conflict_fields=("project", "host", "slot"))
    created = [m for m in new if m.id is not None]  # another worker may have filled a slot first
    if state == LOGGING_IN:
        for member in created:
            _login_start(project, member)
    return bool(gone or created)


def _login_start(project: Project, member: CookieSession) -> None:
    """Queue the session's own row of the login page (with the method and body of a seed of that
    URL, when there is one): what the spider's route for it asks next is the session's too."""
    seed = Seed.objects.filter(project=project, url=project.session_login_url).first()
    request = (seed_request(seed) if seed else {}) | {"session": member.id}
    requests_enqueue(project, [Link(url=project.session_login_url, depth=0, priority=LOGIN_PRIORITY, request=request)])


def session_retire(*, session: CookieSession | int, reason: str) -> bool:
    """Retire a live session of a pool (blocked, logged out, used up): it frees its place, its
    cookies are deleted, and the pool's next round puts a new session (and its login) in its place.
    The entry block detection calls. Safe to call twice and from several workers: True for the
    one call that retired it."""
    session_id = session if isinstance(session, int) else session.id
    retired = CookieSession.objects.filter(id=session_id, slot__isnull=False).update(
        state=RETIRED, slot=None, retired_at=timezone.now(), retired_reason=reason[:200]
    )
    if retired:
        SessionCookie.objects.filter(cookie_session_id=session_id).delete()
    return bool(retired)


def pool_record(
    answers: list[tuple[SessionPool, Page, Session | None, FetchResponse]], *, blocked: set[int] = frozenset()
) -> dict[int, Postpone]:
    """Count each answer against the session it was sent with (uses, errors), mark logins done,
    and retire the sessions spent (blocked, logged out, past their limits; `blocked`: the ids of
    the pages whose answer was a block page, core/blocks.py). Returns the verdicts of the pages
    whose answer spent their session: they are tried again with another."""
    uses, errors, ready, spent, again = Counter(), Counter(), set(), {}, {}
    for pool, page, session, response in answers:
        if session is None or session.owner_id is None:
            continue
        owner = session.owner_id
        judged = BLOCKED if page.id in blocked else _judge(pool.rules, page, response)
        uses[owner] += 1
        errors[owner] += judged == ERROR
        if judged in (BLOCKED, EXPIRED):
            spent.setdefault(owner, f"{judged}: {_answer_of(response)} to {masked_url(page.url)}")
            again[page.id] = Postpone(f"session_{judged}", f"its session was {judged}; tried again", _soon())
        elif judged == OK and "session" in page.request and not _is_login_get(pool.rules, page):
            ready.add(owner)
    # Only a session that erred now, or of a project with a limit of uses, can have crossed a limit.
    limited = {s.owner_id for pool, _, s, _ in answers if s is not None and pool.project.session_max_uses}
    _count(uses, errors, at_once=bool(limited) or any(errors.values()))
    if ready:
        CookieSession.objects.filter(id__in=ready, state=LOGGING_IN).update(state=READY, ready_at=timezone.now())
    for owner, why in spent.items():
        session_retire(session=owner, reason=why)
    checked = ({owner for owner in uses if errors[owner]} | limited) - {None} - set(spent)
    _retire_past_limits([pool for pool, *_ in answers], checked)
    return again


def _judge(rules: SessionRules, page: Page, response: FetchResponse) -> str:
    if response.status_code is None and not is_transient(response.error_code):
        return OK  # refused before it was sent (the egress guard, a bad URL): not the session's doing
    judged = rules.judge(
        status=response.status_code,
        location=response.location if response.is_redirect else "",
        content_type=response.content_type,
        body=response.body,
    )
    return OK if judged == EXPIRED and rules.is_login_page(page.url) else judged  # the login form itself


def _answer_of(response: FetchResponse) -> str:
    if response.is_redirect:
        return f"http {response.status_code} to {masked_url(response.location)}"
    return f"http {response.status_code}" if response.status_code else response.error_code


def _is_login_get(rules: SessionRules, page: Page) -> bool:
    return rules.is_login_page(page.url) and page.request.get("method", "GET") == "GET"


@dataclass
class _Unwritten:
    """The uses and errors this process counted and has not written yet."""

    uses: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    since: float = field(default_factory=time.monotonic)


_UNWRITTEN = _Unwritten()


def _count(uses: Counter, errors: Counter, *, at_once: bool) -> None:
    """Add a round's uses and errors to the sessions' rows, one update per session: at once when a
    limit may be crossed (`at_once`: an error, a limit of uses), else gathered in this process and
    written at most every COUNT_EVERY_SECONDS. Otherwise the counts only order the turns and show in
    the admin, and a statement per round (a broad crawl's round holds a page or two) costs more
    than a few seconds of lag; a killed process loses at most those seconds of counts."""
    global _UNWRITTEN
    _UNWRITTEN.uses.update(uses)
    _UNWRITTEN.errors.update(errors)
    if not at_once and time.monotonic() - _UNWRITTEN.since < COUNT_EVERY_SECONDS:
        return
    now, (pending, _UNWRITTEN) = timezone.now(), (_UNWRITTEN, _Unwritten())
    for owner, used in sorted(pending.uses.items()):
        CookieSession.objects.filter(id=owner).update(
            uses=F("uses") + used, errors=F("errors") + pending.errors[owner], last_used_at=now
        )


def pool_counts_flush(**_signal_kwargs) -> None:
    """Write what _count gathered (a worker's pool process calls it as it stops)."""
    with contextlib.suppress(DatabaseError):
        _count(Counter(), Counter(), at_once=True)


def _retire_past_limits(pools: list[SessionPool], used: set[int]) -> None:
    limits = {pool.project.id: pool.project for pool in pools}
    by_project = defaultdict(set)
    for pool in pools:
        by_project[pool.project.id] |= used & set(pool.members)
    for project_id, owners in by_project.items():
        project = limits[project_id]
        if not owners:
            continue
        over = Q(errors__gte=project.session_max_errors)
        if project.session_max_uses:
            over |= Q(uses__gte=project.session_max_uses)
        for member in CookieSession.objects.filter(over, id__in=owners, slot__isnull=False):
            why = "too many errors" if member.errors >= project.session_max_errors else "used up"
            session_retire(session=member, reason=f"{why} ({member.uses} uses, {member.errors} errors)")


def first_session(project: Project) -> Session:
    """The cookies of the project's first ready session (Try a URL reads them; a project not
    saved yet has none)."""
    if project.pk is None:
        return session_load(project)
    owner = (
        CookieSession.objects.filter(project=project, state=READY, slot__isnull=False)
        .order_by("host", "slot")
        .values_list("id", flat=True)
        .first()
    )
    return session_load(project, owner=owner)


def _soon():
    return timezone.now() + timedelta(seconds=WAIT_SECONDS)
