"""Headless Chromium for the render queue: a round's pages one at a time, in a thread of its own.

Playwright's sync API leaves an asyncio loop running in the thread that uses it, and Django then
refuses database calls from that thread (SynchronousOnlyOperation). So the browser lives in one
dedicated thread per worker process, and the task's thread, which does the database work, only
hands it URLs and waits for the answers.
"""

import logging
import os
import queue
import threading
import time
from concurrent.futures import Future

from django.conf import settings

from core.net.client import FetchRequest, FetchResponse, RenderRequest
from crawl.models import Page, Project
from crawl.policy import allows_private, user_agent_of

from .cookies import Session
from .requests import page_proxy, render_request

log = logging.getLogger("crawlhub.fetch")
_THREAD: tuple[int, queue.Queue] | None = None


def render_page(
    url: str,
    *,
    allow_private: bool,
    user_agent: str,
    proxy: str,
    request: RenderRequest | None = None,
    private_proxy: bool = True,
    timeout: float | None = None,
) -> FetchResponse:
    """Render one page in this process's browser thread (started on first use, after fork too); every
    request of the page goes out through an egress gate, `proxy` (the project's, or "") its upstream
    (on a private network only when `private_proxy`). `request`: the page's method, body, headers and
    cookies (a plain GET without); `timeout`: seconds instead of CRAWL_RENDER_TIMEOUT."""
    future: Future = Future()
    _jobs().put(
        (
            future,
            url,
            {
                "allow_private": allow_private,
                "user_agent": user_agent,
                "proxy": proxy,
                "private_proxy": private_proxy,
                "timeout": timeout or settings.CRAWL_RENDER_TIMEOUT,
                "max_bytes": settings.CRAWL_MAX_BODY_BYTES,
                "request": request,
            },
        )
    )
    return future.result()


def render_all(
    project: Project,
    pages: list[Page],
    requests: list[FetchRequest],
    sessions: list[Session | None],
    proxies: list[str] | None = None,
) -> list[FetchResponse]:
    """One page at a time in this process's headless Chromium, each at its politeness slot, with
    what its request carries (method, body, headers, cookies, validators), its session and its
    proxy pool's proxy (`proxies`: their URLs, "" for none)."""
    agent, private = user_agent_of(project), allows_private(project)
    responses = []
    for page, request, session, pooled in zip(pages, requests, sessions, proxies or [""] * len(pages), strict=True):
        time.sleep(max(0.0, request.start_at - time.time()))
        rendered = render_request(project, page, session, built=request)
        proxy, private_proxy = page_proxy(project, page, pooled)
        response = render_page(
            request.url,
            allow_private=private,
            user_agent=agent,
            proxy=proxy,
            private_proxy=private_proxy,
            request=rendered,
            timeout=request.timeout,
        )
        log.info("rendered %s in Chromium: %s", page.url, response.status_code or response.error_code)
        if session is not None:
            configured = [c for c in rendered.cookies if c not in rendered.session_cookies]
            session.keep_browser(page.url, rendered.session_cookies, response.browser_cookies, configured)
        responses.append(response)
    return responses


def _jobs() -> queue.Queue:
    global _THREAD
    if _THREAD is None or _THREAD[0] != os.getpid():
        jobs: queue.Queue = queue.Queue()
        threading.Thread(target=_serve, args=(jobs,), name="chromium", daemon=True).start()
        _THREAD = (os.getpid(), jobs)
    return _THREAD[1]


def _serve(jobs: queue.Queue) -> None:
    from core.net.browser import Renderer  # Playwright is heavy: only processes that render load it

    renderer = Renderer(executable_path=settings.CRAWL_CHROMIUM_PATH or None)
    while True:
        future, url, options = jobs.get()
        try:
            future.set_result(renderer.render(url, **options))
        except BaseException as exc:  # render() never raises; this keeps the thread alive if it does
            future.set_exception(exc)
