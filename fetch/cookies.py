"""A project's session: the cookies its own sites set (Set-Cookie), kept in the database so every
worker sends them, and sent back by the cookie rules of the standard library's http.cookiejar
(domain, path, secure, expiry) until they expire. A spider that logs in (POSTs a form) stays logged
in. Like the project's own cookies (crawl/hosts/credentials.py), a session cookie is kept from, and sent to,
the project's own sites only. Rendered pages give Chromium the session and keep what it receives.
"""

import contextlib
import email.message
import http.cookiejar
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlsplit

from django.db import transaction
from django.db.models import FilteredRelation, Q
from django.utils import timezone

from core.canonical import host_in_domains
from core.hostnames import cookie_domain_allowed
from crawl.hosts.credentials import secrets_go_to
from crawl.models import CookieSession, Project, SessionCookie
from crawl.policy import project_scope
from crawl.validators import MAX_COOKIE_BYTES, MAX_COOKIES_PER_DOMAIN

CookieKey = tuple[str, str, str]  # (domain, path, name), as http.cookiejar keys them
# A bigger cookie is not kept; past the counts, the cookies learnt or changed last are kept.
MAX_COOKIES_PER_PROJECT = 300
LATEST = datetime(9999, 1, 1, tzinfo=UTC).timestamp()  # a later expiry (Max-Age=1e30) is kept as this


class _BrowserPolicy(http.cookiejar.DefaultCookiePolicy):
    """Browsers' rules: a cookie set without Domain goes back to its own host only (the default
    policy would also send it to subdomains), and one whose Domain is a public suffix or part of an
    IP address is refused (the default policy keeps "Domain=.github.io" and "Domain=.0.0.1")."""

    def __init__(self):
        super().__init__(strict_ns_domain=http.cookiejar.DefaultCookiePolicy.DomainStrictNonDomain)

    def set_ok_domain(self, cookie: http.cookiejar.Cookie, request) -> bool:
        if not super().set_ok_domain(cookie, request):
            return False
        host = http.cookiejar.request_host(request)
        return not cookie.domain_specified or cookie_domain_allowed(cookie.domain, host)


class _Answer:
    """What CookieJar.extract_cookies reads of a response: its Set-Cookie headers."""

    def __init__(self, set_cookies: list[str]):
        self._headers = email.message.Message()
        for value in set_cookies:
            self._headers["Set-Cookie"] = value

    def info(self) -> email.message.Message:
        return self._headers


@dataclass
class Session:
    """A project's session cookies, loaded once for a round of requests; `changes` are written back
    by session_save. An empty Session (keep_cookies off) sends and keeps nothing."""

    project: Project
    enabled: bool
    owner_id: int | None = None  # the CookieSession of the project's pool that keeps these cookies
    jar: http.cookiejar.CookieJar = field(default_factory=lambda: http.cookiejar.CookieJar(policy=_BrowserPolicy()))
    loaded: dict[CookieKey, tuple] = field(default_factory=dict)
    touched: bool = False  # an answer brought cookies: session_save has something to compare

    def header_for(self, url: str) -> dict[str, str]:
        """The session cookies a request to `url` carries (name -> value), by the cookie rules."""
        if not self.enabled or not len(self.jar) or not self._own(url):
            return {}
        request = urllib.request.Request(url)
        self.jar.add_cookie_header(request)
        return _parsed(request.get_header("Cookie") or "")

    def keep(self, url: str, set_cookies: list[str]) -> None:
        """Take the Set-Cookie headers of the answer to a request to `url` (a cookie that expired
        removes its stored one)."""
        if self.enabled and set_cookies and self._own(url):
            self.jar.extract_cookies(_Answer(set_cookies), urllib.request.Request(url))
            self.touched = True

    def browser_cookies(self, url: str) -> list[dict]:
        """The session as Playwright's context.add_cookies takes it, for a render of `url`."""
        if not self.enabled or not self._own(url):
            return []
        return [_to_browser(cookie) for cookie in self.jar if not cookie.is_expired()]

    def keep_browser(self, url: str, given: list[dict], received: list[dict], configured: list[dict]) -> None:
        """The cookies Chromium ended a render of `url` with: new and changed ones of the project's
        own sites are kept (the `configured` ones it was given, the project's and the request's own,
        only when a site changed them), and the session cookies it was `given` but no longer has
        (expired, deleted) are removed."""
        if not self.enabled or not self._own(url):
            return
        self.touched = True
        domains, unchanged = project_scope(self.project).domains, {(c["name"], c["value"]) for c in configured}
        own = [c for c in received if host_in_domains(c.get("domain", "").lstrip("."), domains)]
        for cookie in own:
            if (cookie["name"], cookie.get("value", "")) not in unchanged:
                self.jar.set_cookie(_from_browser(cookie))
        still = {(_jar_domain(c), c.get("path") or "/", c["name"]) for c in own}
        for cookie in given:
            key = (_jar_domain(cookie), cookie.get("path", "/"), cookie["name"])
            if key not in still:
                self._clear(*key)

    def changes(self) -> tuple[list[SessionCookie], list[CookieKey]]:
        """The cookies to write (new or changed) and the keys to delete, since the session was loaded,
        within the caps (MAX_COOKIES_PER_DOMAIN, MAX_COOKIES_PER_PROJECT): a cookie past them is
        dropped from the jar too."""
        now, current = time.time(), {}
        for cookie in self.jar:
            if not cookie.is_expired(now) and _storable(cookie):
                current[(cookie.domain, cookie.path, cookie.name)] = _row_fields(cookie)
        for key in _over_caps(current, self.loaded):
            del current[key]
            self._clear(*key)
        written = [
            SessionCookie(
                project_id=self.project.id, cookie_session_id=self.owner_id, domain=k[0], path=k[1], name=k[2], **fields
            )
            for k, fields in current.items()
            if self.loaded.get(k) != tuple(fields.values())
        ]
        return written, [k for k in self.loaded if k not in current]

    def _own(self, url: str) -> bool:
        return secrets_go_to(url, project_scope(self.project).domains)

    def _clear(self, domain: str, path: str, name: str) -> None:
        with contextlib.suppress(KeyError):
            self.jar.clear(domain, path, name)


def session_load(project: Project, *, owner: int | None = None) -> Session:
    """The project's unexpired session cookies kept by `owner`, one session of its pool (none when
    it does not keep cookies)."""
    return sessions_load(project, owners=[owner])[owner]


def sessions_load(project: Project, *, owners: list[int | None]) -> dict[int | None, Session]:
    """session_load for several sessions of the project's pool, in one query."""
    enabled = project.keep_cookies and project.pk is not None
    sessions = {owner: Session(project=project, enabled=enabled, owner_id=owner) for owner in owners}
    if not enabled or not owners:
        return sessions
    ids, unowned = [o for o in owners if o is not None], None in sessions
    owned = Q(cookie_session_id__in=ids) | Q(cookie_session__isnull=True) if unowned else Q(cookie_session_id__in=ids)
    rows = SessionCookie.objects.filter(owned, project=project).exclude(expires_at__lte=timezone.now())
    for row in rows:
        _jar_load(sessions[row.cookie_session_id], row)
    return sessions


def _jar_load(session: Session, row: SessionCookie) -> None:
    """A kept cookie into the session's jar, remembered as loaded (session_save writes what changed)."""
    cookie = _to_cookie(row)
    session.jar.set_cookie(cookie)
    session.loaded[(row.domain, row.path, row.name)] = tuple(_row_fields(cookie).values())


COOKIE_COLUMNS = ("domain", "path", "name", "value", "secure", "http_only", "expires_at")
SESSION_COLUMNS = tuple(f.attname for f in CookieSession._meta.concrete_fields if f.attname != "project_id")  # id first


def pool_sessions_load(project: Project, wanted: Q) -> tuple[list[CookieSession], dict[int, Session]]:
    """The project's live pool sessions that match `wanted`, each with its unexpired cookies, in one
    query (a join: a session without cookies comes once, with none)."""
    live = Q(cookies__expires_at__isnull=True) | Q(cookies__expires_at__gt=timezone.now())
    rows = (
        CookieSession.objects.filter(wanted, project=project, slot__isnull=False)
        .annotate(live=FilteredRelation("cookies", condition=live))
        .values_list(*SESSION_COLUMNS, *(f"live__{column}" for column in COOKIE_COLUMNS))
    )
    members: dict[int, CookieSession] = {}
    jars: dict[int, Session] = {}
    for row in rows:
        session_fields, cookie_fields = row[: len(SESSION_COLUMNS)], row[len(SESSION_COLUMNS) :]
        owner = session_fields[0]
        if owner not in members:
            members[owner] = CookieSession(project=project, **dict(zip(SESSION_COLUMNS, session_fields, strict=True)))
            jars[owner] = Session(project=project, enabled=True, owner_id=owner)
        if cookie_fields[2] is not None:  # the cookie's name: None when the session has no live cookie
            _jar_load(jars[owner], SessionCookie(**dict(zip(COOKIE_COLUMNS, cookie_fields, strict=True))))
    return list(members.values()), jars


@transaction.atomic
def session_save(session: Session) -> int:
    """Write what the session learnt since it was loaded (upserts by cookie key: workers that learn
    the same cookie at once both succeed), and drop the project's expired cookies. Returns the
    cookies written or removed; nothing is written when no answer brought cookies."""
    if not session.touched:
        return 0
    session.touched = False
    own = SessionCookie.objects.filter(project=session.project, cookie_session_id=session.owner_id)
    own.filter(expires_at__lte=timezone.now()).delete()
    written, removed = session.changes()
    if written:
        SessionCookie.objects.bulk_create(
            written,
            update_conflicts=True,
            unique_fields=["project", "cookie_session", "domain", "path", "name"],
            update_fields=["value", "secure", "http_only", "expires_at", "updated_at"],
        )
    for domain, path, name in removed:
        own.filter(domain=domain, path=path, name=name).delete()
    for cookie in written:
        session.loaded[(cookie.domain, cookie.path, cookie.name)] = (
            cookie.value,
            cookie.secure,
            cookie.http_only,
            cookie.expires_at,
        )
    for key in removed:
        session.loaded.pop(key, None)
    return len(written) + len(removed)


def session_forget(*, project: Project) -> int:
    """Log the project out: delete its session cookies and retire its pool's sessions (new ones log
    in). Returns the cookies deleted."""
    deleted, _ = SessionCookie.objects.filter(project=project).delete()
    CookieSession.objects.filter(project=project, slot__isnull=False).update(
        state=CookieSession.State.RETIRED, slot=None, retired_at=timezone.now(), retired_reason="forgotten"
    )
    return deleted


def _storable(cookie: http.cookiejar.Cookie) -> bool:
    """What the table can hold and a browser would keep: a hostile site's oversized cookies
    (MAX_COOKIE_BYTES), names, domains or paths, or NUL characters are not kept."""
    fields = (cookie.name, cookie.value or "", cookie.domain, cookie.path)
    fitting = len(cookie.name) <= 256 and len(cookie.domain) <= 255 and len(cookie.path) <= 1000
    size = len(cookie.name.encode(errors="replace")) + len((cookie.value or "").encode(errors="replace"))
    return fitting and size <= MAX_COOKIE_BYTES and not any("\x00" in value for value in fields)


def _over_caps(current: dict[CookieKey, dict], loaded: dict[CookieKey, tuple]) -> list[CookieKey]:
    """The keys past the caps: new and changed cookies rank before those unchanged since the load
    (the site's latest word wins, as browsers evict the least recently used first)."""
    fresh = {k: None for k, fields in current.items() if loaded.get(k) != tuple(fields.values())}
    ranked = [*fresh, *(k for k in current if k not in fresh)]
    kept, per_domain, over = 0, {}, []
    for key in ranked:
        domain = key[0].lstrip(".")
        if kept >= MAX_COOKIES_PER_PROJECT or per_domain.get(domain, 0) >= MAX_COOKIES_PER_DOMAIN:
            over.append(key)
            continue
        kept, per_domain[domain] = kept + 1, per_domain.get(domain, 0) + 1
    return over


def _parsed(header: str) -> dict[str, str]:
    pairs = (part.strip().partition("=") for part in header.split(";") if part.strip())
    return {name: value for name, _, value in pairs if name and not name.startswith("$")}


def _row_fields(cookie: http.cookiejar.Cookie) -> dict:
    expires = datetime.fromtimestamp(min(cookie.expires, LATEST), UTC) if cookie.expires is not None else None
    return {
        "value": cookie.value or "",
        "secure": bool(cookie.secure),
        "http_only": cookie.has_nonstandard_attr("HttpOnly"),
        "expires_at": expires,
    }


def _cookie(name, value, domain, path, *, secure, http_only, expires) -> http.cookiejar.Cookie:
    dotted = domain.startswith(".")
    return http.cookiejar.Cookie(
        version=0,
        name=name,
        value=value,
        port=None,
        port_specified=False,
        domain=domain,
        domain_specified=dotted,
        domain_initial_dot=dotted,
        path=path,
        path_specified=True,
        secure=secure,
        expires=expires,
        discard=expires is None,
        comment=None,
        comment_url=None,
        rest={"HttpOnly": None} if http_only else {},
    )


def _to_cookie(row: SessionCookie) -> http.cookiejar.Cookie:
    expires = int(row.expires_at.timestamp()) if row.expires_at else None
    return _cookie(
        row.name, row.value, row.domain, row.path, secure=row.secure, http_only=row.http_only, expires=expires
    )


def _jar_domain(browser_cookie: dict) -> str:
    """A browser cookie's domain as http.cookiejar spells it: a host without a dot gets ".local"."""
    domain = browser_cookie.get("domain", "")
    return domain if "." in domain else f"{domain}.local"


def _to_browser(cookie: http.cookiejar.Cookie) -> dict:
    domain = cookie.domain[: -len(".local")] if cookie.domain.endswith(".local") else cookie.domain
    return {
        "name": cookie.name,
        "value": cookie.value or "",
        "domain": domain,
        "path": cookie.path,
        "expires": float(cookie.expires) if cookie.expires is not None else -1,
        "httpOnly": cookie.has_nonstandard_attr("HttpOnly"),
        "secure": bool(cookie.secure),
    }


def _from_browser(cookie: dict) -> http.cookiejar.Cookie:
    expires = cookie.get("expires", -1)
    return _cookie(
        cookie["name"],
        cookie.get("value", ""),
        _jar_domain(cookie),
        cookie.get("path") or "/",
        secure=bool(cookie.get("secure")),
        http_only=bool(cookie.get("httpOnly")),
        expires=int(expires) if expires and expires > 0 else None,
    )


def request_cookies(url: str, cookies: dict[str, str]) -> list[dict]:
    """Plain name -> value cookies (the project's, a request's own) as host-only browser cookies of `url`."""
    parts = urlsplit(url)
    return [{"name": n, "value": v, "domain": parts.hostname or "", "path": "/"} for n, v in cookies.items()]
