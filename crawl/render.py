"""Render a page in headless Chromium (Playwright's sync API) with the SSRF guard on every request.

No Django here: the caller passes limits and the private-network policy in, and gets the same
FetchResponse the HTTP fetcher returns, its body the rendered DOM.

The guard, and its limits:
- Chromium gets no network of its own (`--host-resolver-rules=MAP * ~NOTFOUND` fails every name
  and address it would connect to: preconnects, prefetches, WebSockets, TURN; WebRTC UDP is off).
- Every request of the context (documents, iframes, scripts, XHR/fetch, images, dedicated workers)
  goes through `context.route`: the handler checks the URL, fetches it with Playwright's driver
  (`route.fetch`, redirects off) and fulfils the page's request. Playwright never routes a redirect
  hop the browser follows itself, so hops are followed here, each checked first (the main document
  by navigating again, so the page keeps its real URL). Service workers and WebSockets are refused.
- The guard resolves the host with getaddrinfo, then the driver resolves it again to connect: a
  DNS-rebinding window that the httpx fetcher (it connects to the checked address) does not have.
- The driver buffers each response whole: audio/video requests are refused, and max_bytes caps the
  rendered HTML, not what the driver downloads.
- A busy script can hang the renderer so that no call returns (page.content() has no timeout): a
  watchdog thread kills this process's browser past the budget; the next render starts a new one.
"""

import logging
import os
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from urllib.parse import urldefrag, urljoin, urlsplit

from playwright.sync_api import Browser, BrowserContext, Page, Playwright, Route, WebSocketRoute, sync_playwright
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from .fetcher import BodyTooLarge, FetchResponse
from .netguard import BlockedAddress, address_permitted

log = logging.getLogger("crawlhub.render")

Guard = Callable[[str], bool]

LAUNCH_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
    "--host-resolver-rules=MAP * ~NOTFOUND",  # see the module docstring: all traffic goes through routes
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
)
FETCHED_SCHEMES = frozenset({"http", "https"})
LOCAL_SCHEMES = frozenset({"data", "blob"})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 10
# Chromium's net::ERR_* text (ours too: a failed route.fetch is aborted with the matching code).
NET_ERRORS = {
    "ERR_NAME_NOT_RESOLVED": "dns_error",
    "ERR_CONNECTION_REFUSED": "connect_error",
    "ERR_CONNECTION_RESET": "connect_error",
    "ERR_ADDRESS_UNREACHABLE": "connect_error",
    "ERR_TIMED_OUT": "render_timeout",
    "ERR_BLOCKED_BY_CLIENT": "blocked_address",
}
ABORT_CODES = (
    ("ENOTFOUND", "namenotresolved"),
    ("EAI_AGAIN", "namenotresolved"),
    ("ECONNREFUSED", "connectionrefused"),
    ("ECONNRESET", "connectionreset"),
    ("Timeout", "timedout"),
)
STALE_HEADERS = ("content-length", "content-encoding", "transfer-encoding")


class BlockedScheme(Exception):
    """Only http and https pages are rendered."""


class TooManyRedirects(Exception):
    pass


EXCEPTION_CODES = (
    (BlockedAddress, "blocked_address"),
    (BlockedScheme, "blocked_scheme"),
    (BodyTooLarge, "body_too_large"),
    (socket.gaierror, "dns_error"),
    (TooManyRedirects, "too_many_redirects"),
)


def address_guard(*, allow_private: bool) -> Guard:
    """The default policy: a URL is allowed when its host resolves only to public addresses.

    An unresolvable host raises socket.gaierror (reported as dns_error, not as a refusal).
    """

    def allows(url: str) -> bool:
        if allow_private:
            return True
        host = urlsplit(url).hostname or ""
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise socket.gaierror(exc.errno, f"cannot resolve {host}: {exc.strerror}") from None
        return all(address_permitted(info[4][0]) for info in infos)

    return allows


class _RenderSession:
    """One render's request policy and what the route handler learnt about the main document."""

    def __init__(self, guard: Guard, deadline: float):
        self.guard, self.deadline = guard, deadline
        self.verdicts: dict[tuple, bool | Exception] = {}
        self.page: Page | None = None
        self.start_url = ""  # the first main-document URL as the browser spelt it
        self.redirect_to = ""
        self.main_failure = ""

    def remaining_ms(self) -> float:
        return max(1.0, (self.deadline - time.monotonic()) * 1000)

    def check(self, url: str) -> None:
        """Raise BlockedScheme, BlockedAddress or socket.gaierror unless the URL may be requested.
        The guard's answer is cached per origin for this render."""
        parts = urlsplit(url)
        if parts.scheme not in FETCHED_SCHEMES:
            raise BlockedScheme(f"scheme {parts.scheme!r} is not rendered: {url[:200]}")
        origin = (parts.scheme, parts.hostname, parts.port)
        if origin not in self.verdicts:
            try:
                self.verdicts[origin] = self.guard(url)
            except (OSError, UnicodeError) as exc:
                self.verdicts[origin] = exc
        verdict = self.verdicts[origin]
        if isinstance(verdict, Exception):
            raise verdict
        if not verdict:
            raise BlockedAddress(f"{parts.hostname} is refused by the address guard")

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
        for _ in range(MAX_REDIRECTS + 1):
            try:
                self.check(url)
            except (BlockedScheme, BlockedAddress, OSError) as exc:
                self.main_failure = str(exc) if is_main else self.main_failure
                return route.abort("namenotresolved" if isinstance(exc, OSError) else "blockedbyclient")
            try:
                answer = route.fetch(url=url, max_redirects=0, timeout=self.remaining_ms())
            except PlaywrightError as exc:
                self.main_failure = str(exc).split("\n", 1)[0] if is_main else self.main_failure
                return route.abort(_abort_code(str(exc)))
            location = answer.headers.get("location", "").strip()
            if answer.status not in REDIRECT_STATUSES or not location:
                return route.fulfill(response=answer)  # never a redirect: the browser would follow it unrouted
            target = urljoin(url, location)
            if is_main:  # navigate again (see _navigate) so that the page shows the final URL
                self.redirect_to = target
                return route.abort("aborted")
            url = target
        return route.abort("failed")  # too many redirects


def _refuse_websocket(ws: WebSocketRoute) -> None:
    # The page itself would open the socket, and Chromium has no network: refuse it cleanly.
    ws.close(code=1008, reason="WebSockets are not rendered")


def _abort_code(message: str) -> str:
    return next((code for marker, code in ABORT_CODES if marker in message), "failed")


def _navigate(page: Page, session: _RenderSession, url: str):
    """page.goto that follows main-document redirects hop by hop; the route handler checks each."""
    for _ in range(MAX_REDIRECTS + 1):
        session.redirect_to = ""
        try:
            response = page.goto(url, timeout=session.remaining_ms(), wait_until="load")
        except PlaywrightError:
            if not session.redirect_to:
                raise
        if not session.redirect_to:
            return response
        url = session.redirect_to
        session.check(url)
    raise TooManyRedirects(f"more than {MAX_REDIRECTS} redirects")


def classify_render_error(exc: BaseException, *, timeout: float, detail: str = "") -> tuple[str, str]:
    """Map an exception to (error_code, message); `detail` is the driver's error for the main document."""
    message = (str(exc).split("\n", 1)[0] or exc.__class__.__name__) + (f" ({detail})" if detail else "")
    for kind, code in EXCEPTION_CODES:
        if isinstance(exc, kind):
            return code, message
    if isinstance(exc, PlaywrightTimeoutError):
        return "render_timeout", f"page did not load within {timeout:g} s"
    for marker, code in NET_ERRORS.items():
        if marker in message:
            return code, message
    return "render_error", f"{exc.__class__.__name__}: {message}"


def _fill(response: FetchResponse, page: Page, main, session: _RenderSession, max_bytes: int) -> None:
    body = page.content().encode("utf-8")
    if len(body) > max_bytes:
        raise BodyTooLarge(f"rendered HTML is {len(body)} bytes, over the {max_bytes}-byte cap")
    response.body = body
    if main is not None:
        response.status_code = main.status
        response.headers = {k: v for k, v in main.headers.items() if k not in STALE_HEADERS}
    response.headers["content-type"] = "text/html; charset=utf-8"
    if urldefrag(page.url)[0] != urldefrag(session.start_url or response.url)[0]:
        response.location = page.url


class Renderer:
    """One Playwright driver and one Chromium per process, started on first use and again after a
    crash. Not thread-safe: Playwright's sync API belongs to the thread that started it.

    A Celery prefork child inherits its parent's objects across fork: they are set aside, never
    closed (that would stop the parent's browser) and kept referenced (garbage collection of the
    driver's transport would kill the parent's driver); the child starts its own.
    """

    def __init__(
        self,
        *,
        executable_path: str | None = None,
        launch_args: Sequence[str] = LAUNCH_ARGS,
        watchdog_grace: float = 5.0,
    ):
        self.executable_path = executable_path
        self.launch_args = tuple(launch_args)
        self.watchdog_grace = watchdog_grace
        self._pid = os.getpid()
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._browser_pid = 0
        self._killed = False
        self._inherited: list = []

    def render(
        self,
        url: str,
        *,
        allow_private: bool,
        user_agent: str,
        timeout: float,
        max_bytes: int,
        wait_after_load_ms: int = 500,
        guard: Guard | None = None,
    ) -> FetchResponse:
        """Load `url` in a fresh context, wait `wait_after_load_ms` after the load event and return
        the serialised DOM. Never raises: failures come back as error_code/error_message.

        `guard(url) -> bool` replaces the address policy (public addresses only unless
        allow_private); it is asked once per origin per render. `timeout` bounds the navigation,
        redirects included; the watchdog bounds the whole render at timeout + wait + watchdog_grace
        (a browser start, the first time or after a crash, comes on top).
        """
        started = time.monotonic()
        response = FetchResponse(url=url)
        session = _RenderSession(guard or address_guard(allow_private=allow_private), started + timeout)
        try:
            session.check(url)
            self._render_into(response, session, user_agent, timeout, max_bytes, wait_after_load_ms)
        except Exception as exc:
            response.error_code, response.error_message = classify_render_error(
                exc, timeout=timeout, detail=session.main_failure
            )
            if self._killed:
                response.error_code = "render_timeout"
                response.error_message = "the page kept the browser busy past the render budget; browser killed"
        response.elapsed = time.monotonic() - started
        return response

    def _render_into(self, response, session, user_agent, timeout, max_bytes, wait_after_load_ms) -> None:
        context = self._new_context(user_agent)
        session.deadline = time.monotonic() + timeout
        watchdog = self._watchdog(timeout + wait_after_load_ms / 1000 + self.watchdog_grace)
        try:
            context.route("**/*", session.handle_request)
            context.route_web_socket("**/*", _refuse_websocket)
            session.page = context.new_page()
            main = _navigate(session.page, session, response.url)
            session.page.wait_for_timeout(wait_after_load_ms)
            _fill(response, session.page, main, session, max_bytes)
        finally:
            with suppress(PlaywrightError):
                context.close()
            watchdog.cancel()

    def close(self) -> None:
        if self._pid == os.getpid():
            self._stop()

    def _new_context(self, user_agent: str) -> BrowserContext:
        """A fresh context per render: no cookies or cache shared between pages."""
        options = {"user_agent": user_agent, "service_workers": "block", "accept_downloads": False}
        try:
            return self._ready_browser().new_context(**options)
        except PlaywrightError:  # a browser that died since the last render can still look connected
            self._stop()
            return self._ready_browser().new_context(**options)

    def _ready_browser(self) -> Browser:
        if self._pid != os.getpid():
            self._inherited.append((self._playwright, self._browser))
            self._pid, self._playwright, self._browser = os.getpid(), None, None
        if self._browser is None or self._killed or not self._browser.is_connected():
            self._stop()
            self._start()
        return self._browser

    def _start(self) -> None:
        executable = self.executable_path or shutil.which("chromium")
        if not executable:
            raise FileNotFoundError("chromium is not installed (scripts/system-deps.sh installs it)")
        self._playwright = sync_playwright().start()
        self._browser = self._playwright.chromium.launch(executable_path=executable, args=list(self.launch_args))
        cdp = self._browser.new_browser_cdp_session()
        processes = cdp.send("SystemInfo.getProcessInfo")["processInfo"]
        cdp.detach()
        self._browser_pid = next(p["id"] for p in processes if p["type"] == "browser")
        self._killed = False

    def _stop(self) -> None:
        """Best effort: after a crash the browser or the driver may already be gone."""
        if self._browser is not None:
            with suppress(Exception):
                self._browser.close()
        if self._playwright is not None:
            with suppress(Exception):
                self._playwright.stop()
        self._browser = self._playwright = None

    def _watchdog(self, seconds: float) -> threading.Timer:
        timer = threading.Timer(seconds, self._kill_browser, args=(self._browser_pid,))
        timer.daemon = True
        timer.start()
        return timer

    def _kill_browser(self, pid: int) -> None:
        """Runs in the timer thread: a render overran its budget (a script keeps the renderer busy)."""
        self._killed = True
        log.warning("render overran its budget; killing browser pid %s", pid)
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
