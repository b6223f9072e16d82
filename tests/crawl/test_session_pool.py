"""A project's pool of cookie sessions: they take turns, one pool per host when pinned; a new one
queues its own login; an answer that blocks or logs out its session retires it (its page is tried
again), as do its limits of uses and errors; a retired session's place is taken by a new one."""

from collections import Counter

import pytest

from core.canonical import host_of, url_key
from core.net.client import FetchResponse
from crawl.frontier.verdicts import Postpone
from crawl.models import CookieSession, Page, Project, SessionCookie
from crawl.session_rules import BLOCKED, ERROR, EXPIRED, OK, SessionRules, statuses_of
from fetch.session_pool import pool_load, pool_record, session_retire

SITE = "http://shop.test"
LOGIN = f"{SITE}/login"


def page_of(project: Project, url: str, **fields) -> Page:
    return Page.objects.create(project=project, url=url, url_key=url_key(url), host=host_of(url), **fields)


def answer(url: str, status: int | None = 200, **fields) -> FetchResponse:
    return FetchResponse(url=url, status_code=status, **fields)


def test_it_judges_blocks_logouts_and_errors_by_the_projects_rules():
    rules = SessionRules(login_url=LOGIN, expired_selector="form#login", retire_statuses=statuses_of("403, 429"))
    html, plain = "text/html", b"<html><body>ok</body></html>"
    assert rules.judge(status=200, location="", content_type=html, body=plain) == OK
    assert rules.judge(status=403, location="", content_type=html, body=plain) == BLOCKED
    assert rules.judge(status=200, location="", content_type=html, body=plain, blocked=True) == BLOCKED
    assert rules.judge(status=302, location=f"{LOGIN}?next=/a", content_type=html, body=b"") == EXPIRED
    assert rules.judge(status=302, location=f"{SITE}/elsewhere", content_type=html, body=b"") == OK
    logged_out = b'<html><body><form id="login"></form></body></html>'
    assert rules.judge(status=200, location="", content_type=html, body=logged_out) == EXPIRED
    assert rules.judge(status=200, location="", content_type="text/plain", body=logged_out) == OK
    assert rules.judge(status=503, location="", content_type=html, body=b"") == ERROR
    assert rules.judge(status=None, location="", content_type="", body=b"") == ERROR
    with pytest.raises(ValueError, match="not an HTTP status"):
        statuses_of("403 forbidden")


@pytest.mark.django_db
def test_the_ready_sessions_take_turns():
    project = Project.objects.create(name="p", slug="p", session_pool_size=3)
    pages = [page_of(project, f"{SITE}/{i}") for i in range(6)]
    pool = pool_load(project, pages)
    assert sorted(m.slot for m in pool.members.values()) == [0, 1, 2]
    assert {m.state for m in pool.members.values()} == {"ready"}, "no login page: ready at once"
    used = Counter(pool.pick(page).owner_id for page in pages)
    assert sorted(used.values()) == [2, 2, 2]
    assert len(pool_load(project, pages).members) == 3, "a second round finds the same pool"


@pytest.mark.django_db
def test_a_pinned_pool_is_one_pool_per_host():
    project = Project.objects.create(name="h", slug="h", session_pool_size=2, session_per_host=True)
    pages = [page_of(project, url) for url in (f"{SITE}/a", "http://other.test/b")]
    pool = pool_load(project, pages)
    assert Counter(m.host for m in pool.members.values()) == {"shop.test": 2, "other.test": 2}
    chosen = pool.pick(pages[1])
    assert pool.members[chosen.owner_id].host == "other.test"


@pytest.mark.django_db
def test_a_new_session_queues_its_own_login_and_pages_wait_until_it_is_ready():
    project = Project.objects.create(name="l", slug="l", session_pool_size=2, session_login_url=LOGIN)
    member = page_of(project, f"{SITE}/members/")
    pool = pool_load(project, [member])
    logins = Page.objects.filter(project=project, url=LOGIN)
    assert sorted(r["session"] for r in logins.values_list("request", flat=True)) == sorted(pool.members)
    assert len(set(logins.values_list("url_key", flat=True))) == 2, "a row of its own for each session's login"
    assert pool.pick(member) is None and isinstance(pool.refusal(member), Postpone)
    login = logins.first()
    form = page_of(
        project, f"{SITE}/session", request={"method": "POST", "body": "u=1", "session": login.request["session"]}
    )
    pool = pool_load(project, [login, form])
    answers = [
        (pool, login, pool.pick(login), answer(LOGIN)),
        (pool, form, pool.pick(form), answer(f"{SITE}/session", 303, location=f"{SITE}/members/")),
    ]
    assert pool_record(answers) == {}
    assert CookieSession.objects.get(id=login.request["session"]).state == "ready", "its form was answered well"
    assert pool_load(project, [member]).pick(member).owner_id == login.request["session"]


@pytest.mark.django_db
def test_a_blocked_or_logged_out_session_is_retired_and_replaced_and_its_page_tried_again():
    project = Project.objects.create(
        name="b", slug="b", session_pool_size=2, session_retire_statuses="403", session_login_url=LOGIN
    )
    CookieSession.objects.bulk_create([CookieSession(project=project, slot=s, state="ready") for s in (0, 1)])
    pages = [page_of(project, f"{SITE}/{i}") for i in range(3)]
    pool = pool_load(project, pages)
    sessions = [pool.pick(page) for page in pages]
    SessionCookie.objects.create(project=project, cookie_session_id=sessions[0].owner_id, name="sid", value="x")
    blocked = answer(pages[0].url, 403)
    logged_out = answer(pages[1].url, 302, location=f"{LOGIN}?next=/1")
    again = pool_record(
        [(pool, p, s, a) for p, s, a in zip(pages, sessions, [blocked, logged_out, answer(pages[2].url)], strict=True)]
    )
    assert set(again) == {pages[0].id, pages[1].id} and again[pages[0].id].code == "session_blocked"
    retired = CookieSession.objects.filter(state="retired")
    reasons = dict(retired.values_list("id", "retired_reason"))
    assert reasons[sessions[0].owner_id].startswith("blocked: http 403")
    assert reasons[sessions[1].owner_id].startswith("expired: http 302")
    assert not SessionCookie.objects.exists(), "a retired session's cookies are deleted"
    assert not session_retire(session=sessions[0].owner_id, reason="again"), "retired once"
    fresh = pool_load(project, pages)
    assert len(fresh.members) == 2 and not set(fresh.members) & set(reasons)
    assert {m.state for m in fresh.members.values()} == {"logging_in"}


@pytest.mark.django_db
def test_a_session_is_retired_past_its_uses_or_its_errors():
    project = Project.objects.create(name="u", slug="u", session_pool_size=1, session_max_uses=3, session_max_errors=2)
    page = page_of(project, f"{SITE}/a")
    for status in (200, 200):
        pool = pool_load(project, [page])
        pool_record([(pool, page, pool.pick(page), answer(page.url, status))])
    first = CookieSession.objects.get()
    assert (first.uses, first.state) == (2, "ready")
    pool = pool_load(project, [page])
    pool_record([(pool, page, pool.pick(page), answer(page.url))])
    first.refresh_from_db()
    assert first.state == "retired" and first.retired_reason.startswith("used up (3 uses")
    for _ in range(2):
        pool = pool_load(project, [page])
        pool_record([(pool, page, pool.pick(page), answer(page.url, None, error_code="connect_error"))])
    second = CookieSession.objects.exclude(id=first.id).get()
    assert second.state == "retired" and second.retired_reason.startswith("too many errors")
