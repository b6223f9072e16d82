"""Render a page in headless Chromium (Playwright's sync API), every request through an egress gate.

No Django here: the caller passes limits, the private-network policy and the project's proxy in, and
gets the same FetchResponse the HTTP fetcher returns, its body the rendered DOM.

The guard, and what it guarantees:
- Each render has its own egress gate (core.net.egress, a proxy on 127.0.0.1): it resolves each target
  once, refuses it unless netguard permits every address, and connects to the checked address
  (through the project's proxy if there is one), so DNS cannot rebind between check and connect.
- Chromium gets no network of its own (`--host-resolver-rules=MAP * ~NOTFOUND` fails every name and
  address, the gate's too: preconnects, prefetches, WebSockets, TURN; WebRTC UDP is off). Every
  request of the context (documents, iframes, scripts, XHR/fetch, images, dedicated workers) goes
  through `context.route`: the handler fetches it with Playwright's driver (`route.fetch`, redirects
  off), whose one way out is the context's proxy, the gate (loopback too: the driver tunnels http
  and https alike with CONNECT), and fulfils. Playwright never routes a redirect hop the browser
  follows itself, so hops are followed here (the main document by navigating again, so the page
  keeps its real URL). Service workers and WebSockets are refused.
- A refused main document fails the render with blocked_address and the gate's reason; a refused
  subrequest just fails. Only refusals in the gate's own list count: a site cannot forge one.
- Chromium's environment holds PATH, the locale and a temporary HOME, none of the worker's secrets.
  It is sandboxed unless the worker runs as root (Chromium refuses the sandbox there); unsandboxed,
  a compromised renderer can read whatever the worker's user can (files, /proc).
- The driver buffers each response whole: audio/video requests are refused, and max_bytes caps the
  rendered HTML, not what the driver downloads.
- A busy script can hang the renderer so that no call returns (page.content() has no timeout): a
  watchdog thread kills this process's browser past the budget; the next render starts a new one.
"""

import logging
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Sequence
from contextlib import suppress
from urllib.parse import urldefrag

from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from core.net.browser_routes import (
    BlockedScheme,
    RenderSession,
    TooManyRedirects,
    check_scheme,
    navigate,
    refuse_websocket,
)
from core.net.client import BodyTooLarge, FetchResponse, RenderRequest
from core.net.egress import EgressError, gate, upstream_of
from core.net.guard import BlockedAddress
from core.net.page_actions import actions_run

log = logging.getLogger("crawlhub.render")

LAUNCH_ARGS = (
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
BROWSER_ENV = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "TZ")  # all Chromium gets of the worker's environment
# Chromium's net::ERR_* text (ours too: a failed route.fetch is aborted with the matching code).
NET_ERRORS = {
    "ERR_NAME_NOT_RESOLVED": "dns_error",
    "ERR_CONNECTION_REFUSED": "connect_error",
    "ERR_CONNECTION_RESET": "connect_error",
    "ERR_ADDRESS_UNREACHABLE": "connect_error",
    "ERR_TIMED_OUT": "render_timeout",
    "ERR_BLOCKED_BY_CLIENT": "blocked_address",
}
STALE_HEADERS = ("content-length", "content-encoding", "transfer-encoding")
EXCEPTION_CODES = (
    (BlockedAddress, "blocked_address"),
    (BlockedScheme, "blocked_scheme"),
    (BodyTooLarge, "body_too_large"),
    (TooManyRedirects, "too_many_redirects"),
)


def browser_env(home: str) -> dict[str, str]:
    """Chromium's whole environment: no database, broker, storage or Django secrets of the worker."""
    env = {name: os.environ[name] for name in BROWSER_ENV if name in os.environ}
    return {"PATH": "/usr/bin:/bin"} | env | {"HOME": home}


def classify_render_error(exc: BaseException, *, timeout: float, detail: str = "") -> tuple[str, str]:
    """Map an exception to (error_code, message); `detail` is the driver's error for the main document."""
    message = (str(exc).split("\n", 1)[0] or exc.__class__.__name__) + (f" ({detail})" if detail else "")
    if isinstance(exc, EgressError):
        return exc.error_code, message
    for kind, code in EXCEPTION_CODES:
        if isinstance(exc, kind):
            return code, message
    if isinstance(exc, PlaywrightTimeoutError):
        return "render_timeout", f"page did not load within {timeout:g} s"
    for marker, code in NET_ERRORS.items():
        if marker in message:
            return code, message
    return "render_error", f"{exc.__class__.__name__}: {message}"


def _check_proxy(proxy: str) -> None:
    try:
        upstream_of(proxy)
    except ValueError as exc:
        raise EgressError("proxy_error", str(exc)) from None


def _fill(response: FetchResponse, page: Page, main, session: RenderSession, max_bytes: int) -> None:
    body = page.content().encode("utf-8")
    if len(body) > max_bytes:
        raise BodyTooLarge(f"rendered HTML is {len(body)} bytes, over the {max_bytes}-byte cap")
    response.body = body
    if main is not None:
        response.status_code = 304 if session.not_modified else main.status
        response.headers = {k: v for k, v in main.headers.items() if k not in STALE_HEADERS}
    response.headers["content-type"] = "text/html; charset=utf-8"
    if urldefrag(page.url)[0] != urldefrag(session.start_url or response.url)[0]:
        response.location = page.url


def _add_cookies(context: BrowserContext, cookies: list[dict]) -> None:
    """The render's cookies; one Chromium refuses (a malformed domain, say) is left out, not fatal."""
    if not cookies:
        return
    try:
        context.add_cookies(cookies)
    except PlaywrightError:
        for cookie in cookies:
            with suppress(PlaywrightError):
                context.add_cookies([cookie])


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
        self._home = ""  # the browser's HOME, a temporary directory
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
        proxy: str = "",
        request: RenderRequest | None = None,
        private_proxy: bool = True,
    ) -> FetchResponse:
        """Load `url` in a fresh context, wait `wait_after_load_ms` after the load event and return
        the serialised DOM. Never raises: failures come back as error_code/error_message.

        Every request goes through a gate of this render's own (see the module docstring), with the
        project's `proxy` (http://[user:password@]host:port) as its upstream (on a private network only
        when `private_proxy`). `timeout` bounds the
        navigation, redirects included; the watchdog bounds the whole render at timeout + wait +
        watchdog_grace (a browser start, the first time or after a crash, comes on top).

        `request`: the page's method, body and headers (they go with its first request only: a
        redirect is followed with a GET, as a browser does) and the cookies the context starts
        with; the cookies the context ends with come back in `browser_cookies`. Its `actions` run
        once the page has loaded, within `timeout` (core.net.page_actions).
        """
        started = time.monotonic()
        response = FetchResponse(url=url)
        session = RenderSession(started + timeout, request or RenderRequest())
        try:
            check_scheme(url)
            if proxy:
                _check_proxy(proxy)
            with gate(allow_private=allow_private, upstream=proxy, private_upstream=private_proxy) as way_out:
                session.refusals = way_out.refusals
                self._render_into(response, session, way_out.url, user_agent, timeout, max_bytes, wait_after_load_ms)
        except Exception as exc:
            response.error_code, response.error_message = classify_render_error(
                exc, timeout=timeout, detail=session.main_failure
            )
            if self._killed:
                response.error_code = "render_timeout"
                response.error_message = "the page kept the browser busy past the render budget; browser killed"
        response.elapsed = time.monotonic() - started
        return response

    def _render_into(self, response, session, gate_url, user_agent, timeout, max_bytes, wait_after_load_ms) -> None:
        context = self._new_context(user_agent, gate_url)
        session.deadline = time.monotonic() + timeout
        watchdog = self._watchdog(timeout + wait_after_load_ms / 1000 + self.watchdog_grace)
        try:
            context.route("**/*", session.handle_request)
            context.route_web_socket("**/*", refuse_websocket)
            _add_cookies(context, session.request.cookies)
            session.page = context.new_page()
            main = navigate(session.page, session, response.url)
            actions_run(session.page, session.request.actions, deadline=session.deadline, pace=session.request.pace)
            session.page.wait_for_timeout(wait_after_load_ms)
            _fill(response, session.page, main, session, max_bytes)
            response.browser_cookies = context.cookies()
        finally:
            with suppress(PlaywrightError):
                context.close()
            watchdog.cancel()

    def close(self) -> None:
        if self._pid == os.getpid():
            self._stop()

    def _new_context(self, user_agent: str, gate_url: str) -> BrowserContext:
        """A fresh context per render: no cookies or cache shared between pages. Its proxy is the
        gate, for route.fetch (the driver) and Chromium alike; an empty bypass list proxies loopback."""
        options = {
            "user_agent": user_agent,
            "service_workers": "block",
            "accept_downloads": False,
            "proxy": {"server": gate_url, "bypass": ""},
        }
        try:
            return self._ready_browser().new_context(**options)
        except PlaywrightError:  # a browser that died since the last render can still look connected
            self._stop()
            return self._ready_browser().new_context(**options)

    def _ready_browser(self) -> Browser:
        if self._pid != os.getpid():
            self._inherited.append((self._playwright, self._browser))
            self._pid, self._playwright, self._browser, self._home = os.getpid(), None, None, ""
        if self._browser is None or self._killed or not self._browser.is_connected():
            self._stop()
            self._start()
        return self._browser

    def _start(self) -> None:
        executable = self.executable_path or shutil.which("chromium")
        if not executable:
            raise FileNotFoundError("chromium is not installed (scripts/system-deps.sh installs it)")
        self._home = tempfile.mkdtemp(prefix="crawlhub-chromium-")
        self._playwright = sync_playwright().start()
        self._browser = self._playwright.chromium.launch(
            executable_path=executable,
            args=list(self.launch_args),
            env=browser_env(self._home),
            chromium_sandbox=os.geteuid() != 0,  # Chromium refuses its sandbox as root
        )
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
        if self._home:
            shutil.rmtree(self._home, ignore_errors=True)
        self._browser = self._playwright = None
        self._home = ""

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
