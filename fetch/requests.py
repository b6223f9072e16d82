"""A page's request: what build_request sends (the project's headers and cookies, the session's, the
row's own request, the conditional-GET validators) and render_request gives Chromium; what a page's
own request asks of its fetch beside the project's settings (a spider's Request(proxy=, timeout=));
and the signer a higher layer may give for a project's requests (crawl.signals.request_signer: a
spider's sign() hook)."""

from collections.abc import Callable

from core.canonical import host_of
from core.net.client import FetchRequest, RenderRequest, runner
from crawl.hosts.credentials import project_secrets_for
from crawl.models import Page, Project
from crawl.policy import allows_private, user_agent_of
from crawl.signals import request_signer

from .cookies import Session, request_cookies

Signer = Callable[[Page, FetchRequest], FetchRequest]


class SignError(Exception):
    """A signer failed, or changed what it may not (the host its slot was booked for)."""


def page_proxy(project: Project, page: Page, pooled: str = "") -> tuple[str, bool]:
    """The proxy the page goes through, and whether it may be on a private network: the project's
    own (`pooled`, the one its pool gave the page, else its proxy setting: trusted, as its other
    settings are), or one the page's request names, private only where the project allows private
    addresses."""
    own = page.request.get("proxy") or ""
    if not own or own in (project.proxy, pooled):
        return pooled or project.proxy, True
    return own, allows_private(project)


def page_client(project: Project, page: Page, pooled: str = ""):
    """The client of a page whose request names a proxy of its own, or whose pool gave it one
    (None: the project's client)."""
    proxy, private_proxy = page_proxy(project, page, pooled)
    if proxy == project.proxy:
        return None
    return runner.client(allow_private=allows_private(project), proxy=proxy, private_proxy=private_proxy)


def signer_of(project: Project) -> Signer | None:
    """The function that signs the project's requests, if a receiver of request_signer gives one."""
    for _, answer in request_signer.send(sender=Project, project=project):
        if callable(answer):
            return answer
    return None


def signed(signer: Signer, page: Page, request: FetchRequest) -> FetchRequest:
    """The request as the signer returns it (raises SignError when it fails, or moves the request
    to another host than the one its slot was booked on)."""
    try:
        result = signer(page, request)
    except Exception as exc:  # the signer is user code: any failure fails this page only
        raise SignError(f"sign() failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(result, FetchRequest):
        raise SignError(f"sign() must return the request, not {type(result).__name__}")
    if host_of(result.url) != host_of(request.url):
        raise SignError(f"sign() may not send the request to another host ({host_of(result.url)})")
    return result


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


def render_request(
    project: Project, page: Page, session: Session | None = None, *, built: FetchRequest | None = None
) -> RenderRequest:
    """What build_request sends (or `built`, the request the round built and signed), for Chromium:
    the cookies (the project's, the session's and the row's own) go into the browser, whose cookie
    rules send them; the rest goes with the page's first request. The row's page actions (a rule
    set's, a route's or the request's own) run once the page has loaded."""
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
        actions=page.request.get("actions", []),
        pace=project.min_delay,  # what the page's actions load is spaced as its host's pages are
    )
