"""What happens to each request of a rendered page: the route handler (see core.net.browser's docstring)."""

import logging
import time
from contextlib import suppress
from urllib.parse import urljoin, urlsplit

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, Route, WebSocketRoute

from core.net.client import RenderRequest
from core.net.egress import EGRESS_HEADER, EgressError
from core.net.guard import BlockedAddress

log = logging.getLogger("crawlhub.render")

FETCHED_SCHEMES = frozenset({"http", "https"})
LOCAL_SCHEMES = frozenset({"data", "blob"})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 10
# A subrequest's fetch outlives the navigation's timeout: were it to time out first, the page would
# finish loading without it and the render pass for complete.
FETCH_GRACE_MS = 1000
ABORT_CODES = (("ECONNREFUSED", "connectionrefused"), ("ECONNRESET", "connectionreset"), ("Timeout", "timedout"))


class BlockedScheme(Exception):
    """Only http and https pages are rendered."""


class TooManyRedirects(Exception):
    pass


def check_scheme(url: str) -> None:
    scheme = urlsplit(url).scheme
    if scheme not in FETCHED_SCHEMES:
        raise BlockedScheme(f"scheme {scheme!r} is not rendered: {url[:200]}")


class RenderSession:
    """One render's gate and what the route handler learnt about the main document."""

    def __init__(self, deadline: float, request: RenderRequest | None = None):
        self.deadline = deadline
        self.request = request or RenderRequest()  # the page's own method, body and headers: its first request's
        self.first_sent = False
        self.not_modified = False  # the first request was answered 304 (its validators matched)
        self.refusals: list[str] = []  # the gate's own list
        self.page: Page | None = None
        self.start_url = ""  # the first main-document URL as the browser spelt it
        self.redirect_to = ""
        self.main_failure = ""  # the driver's error for the main document
        self.main_error: Exception | None = None  # the main document's refusal or the gate's error

    def remaining_ms(self) -> float:
        return max(1.0, (self.deadline - time.monotonic()) * 1000)

    def raise_gate_answer(self, url: str, answer) -> None:
        """Raise BlockedAddress or EgressError when the gate answered instead of the target.
        A refusal counts only when the gate listed it: a site cannot fake one for another host."""
        code = answer.headers.get(EGRESS_HEADER.lower(), "")
        if not code or answer.status < 400:
            return
        if code != "blocked_address":
            raise EgressError(code, answer.status_text.partition(": ")[2] or answer.status_text)
        host = urlsplit(url).hostname or ""
        reason = next((r for r in reversed(self.refusals) if r.startswith(f"{host} ")), "")
        if reason:
            raise BlockedAddress(reason)

    def handle_request(self, route: Route) -> None:
        # A handler must never raise into Playwright's dispatcher; the page may close under it.
        try:
            self._handle(route)
        except Exception:
            log.debug("route handler failed for %s", route.request.url[:200], exc_info=True)
            with suppress(PlaywrightError):
                route.abort("failed")

    def _handle(self, route: Route) -> None:
        request, url = route.request, route.request.url
        if urlsplit(url).scheme in LOCAL_SCHEMES:
            return route.continue_()
        if request.resource_type == "media":  # audio/video: the driver would buffer the whole file
            return route.abort("blockedbyclient")
        is_main = self.page is not None and request.is_navigation_request() and request.frame == self.page.main_frame
        self.start_url = self.start_url or (url if is_main else "")
        own = self._own_request(route) if is_main and not self.first_sent else {}
        self.first_sent = self.first_sent or is_main
        for _ in range(MAX_REDIRECTS + 1):
            try:
                check_scheme(url)
                answer = route.fetch(url=url, max_redirects=0, timeout=self.remaining_ms() + FETCH_GRACE_MS, **own)
                self.raise_gate_answer(url, answer)
            except (BlockedScheme, BlockedAddress, EgressError) as exc:
                self.main_error = exc if is_main else self.main_error
                return route.abort("failed" if isinstance(exc, EgressError) else "blockedbyclient")
            except PlaywrightError as exc:
                self.main_failure = str(exc).split("\n", 1)[0] if is_main else self.main_failure
                return route.abort(abort_code(str(exc)))
            if own and answer.status == 304:  # unchanged: Chromium shows an empty page, the crawl keeps its copy
                self.not_modified = True
                return route.fulfill(status=200, body="", headers={"content-type": "text/html"})
            location = answer.headers.get("location", "").strip()
            if answer.status not in REDIRECT_STATUSES or not location:
                return route.fulfill(response=answer)  # never a redirect: the browser would follow it unrouted
            target = urljoin(url, location)
            if is_main:  # navigate again (see navigate) so that the page shows the final URL
                self.redirect_to = target
                return route.abort("aborted")
            url = target
        return route.abort("failed")  # too many redirects

    def _own_request(self, route: Route) -> dict:
        """route.fetch's overrides for the page's first request: its method, body and headers."""
        request = self.request
        if request.method == "GET" and request.body is None and not request.headers:
            return {}
        own = {"method": request.method, "headers": {**route.request.headers, **request.headers}}
        return own | ({"post_data": request.body} if request.body is not None else {})


def refuse_websocket(ws: WebSocketRoute) -> None:
    # The page itself would open the socket, and Chromium has no network: refuse it cleanly.
    ws.close(code=1008, reason="WebSockets are not rendered")


def abort_code(message: str) -> str:
    return next((code for marker, code in ABORT_CODES if marker in message), "failed")


def navigate(page: Page, session: RenderSession, url: str):
    """page.goto that follows main-document redirects hop by hop; the route handler checks each."""
    for _ in range(MAX_REDIRECTS + 1):
        session.redirect_to = ""
        try:
            response = page.goto(url, timeout=session.remaining_ms(), wait_until="load")
        except PlaywrightError:
            if session.main_error is not None:
                raise session.main_error from None
            if not session.redirect_to:
                raise
        if not session.redirect_to:
            return response
        url = session.redirect_to
        check_scheme(url)
    raise TooManyRedirects(f"more than {MAX_REDIRECTS} redirects")
