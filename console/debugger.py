"""The spider debugger: a draft spider's source run on one request, fetched through the project's
egress (address guard, session, headers, proxy), or on the project's last stored responses
(console/debugger_stored.py). The web process only writes the question (`debug_run_start`) and
reads the answer; a worker runs the code (`debug_run_execute`, the console.debug_run task) in a
child process under the CRAWL_DEBUG_* limits (scrape/sandbox.py), so a draft that never ends is
stopped and the worker goes on."""

import base64
import dataclasses
import re
import time
import zlib

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from console.debug_models import DebugRun
from console.debugger_stored import stored_report
from console.masking import masked_response_headers
from console.tryurl import FOLLOW, link_fates, robots_decision, trial_fetch
from core.canonical import InvalidURL, canonicalize, server_of, url_key
from core.net.client import FetchRequest
from crawl.frontier.verdicts import Link
from crawl.models import Page, Project
from crawlproject.control_tasks import DEBUG_RUN
from fetch.requests import Signer, SignError
from scrape.extraction import PageResult
from scrape.sandbox import Limits, SandboxStopped, sandbox_response, sandbox_run, sources_run
from scrape.spider_request import Request

MAX_TEXT_CHARS = 1_000_000  # of a response shown as source and rendered
# The fates a follow-up request can have, in the debugger's words (console/tryurl.py's, grouped).
FATE_WORDS = {FOLLOW: "new", "already known": "known", "robots.txt": "refused by robots.txt"}
REQUEST_FIELDS = ("method", "headers", "body", "route", "meta", "cookies", "proxy", "render", "timeout")
_DEFINES_SIGN = re.compile(r"^\s+def sign\s*\(", re.MULTILINE)  # worth asking the sandbox about


def debug_limits() -> Limits:
    return Limits(seconds=settings.CRAWL_DEBUG_SECONDS, memory_mb=settings.CRAWL_DEBUG_MEMORY_MB)


def request_checked(url: str, stored: dict) -> dict:
    """The request as a frontier row keeps it (Page.request), checked as a spider's Request is;
    raises RequestError (a ValueError) with the reason."""
    extra = {name: stored[name] for name in REQUEST_FIELDS if stored.get(name) not in (None, "", {}, [])}
    return Request(url, **extra).page_request()


def debug_run_start(*, project: Project, user, source: str, url: str = "", request: dict | None = None,
                    stored_pages: int = 0) -> DebugRun:  # fmt: skip
    """Record a run and hand it to a worker after the commit: on `url` with `request` (method,
    headers, body, route, meta), or, with `stored_pages`, on that many of the last stored pages."""
    mode = DebugRun.Mode.STORED if stored_pages else DebugRun.Mode.REQUEST
    if mode == DebugRun.Mode.REQUEST:
        asked = {"url": url, **request_checked(url, request or {})}
    else:  # kept for the form: the run panel still shows the request it was on
        asked = {"url": url, **request_checked(url, request or {})} if url else {}
    run = DebugRun.objects.create(
        project=project, user=user, mode=mode, source=source, request=asked, stored_pages=stored_pages
    )
    transaction.on_commit(lambda: current_app.send_task(DEBUG_RUN.name, args=[run.id], queue=DEBUG_RUN.queue))
    return run


def debug_run_wait(run: DebugRun, *, seconds: float) -> DebugRun:
    """The run, re-read until it is finished or `seconds` have passed (the page refreshes after)."""
    deadline = time.monotonic() + seconds
    while not run.finished and time.monotonic() < deadline:
        time.sleep(0.2)
        run.refresh_from_db()
    return run


def debug_run_execute(run_id: int) -> str:
    """Run a recorded run (in a worker) and write its report; returns its state."""
    updated = DebugRun.objects.filter(id=run_id, state=DebugRun.State.QUEUED).update(state=DebugRun.State.RUNNING)
    if not updated:
        return "taken"  # a duplicate message: another worker has it
    run = DebugRun.objects.select_related("project").get(id=run_id)
    try:
        if run.mode == DebugRun.Mode.STORED:
            report = stored_report(run.project, run.source, count=run.stored_pages, limits=debug_limits())
            body = b""
        else:
            report, body = request_report(run.project, run.source, run.request)
        state = DebugRun.State.DONE
    except SandboxStopped as exc:
        report, body, state = {"stopped": str(exc)}, b"", DebugRun.State.FAILED
    DebugRun.objects.filter(id=run_id).update(
        state=state, report=report, body=zlib.compress(body, 3), finished_at=timezone.now()
    )
    return state


def request_report(project: Project, source: str, asked: dict) -> tuple[dict, bytes]:
    """Fetch the request as the crawl would and run the draft on the answer: the report, and the body."""
    try:
        url = canonicalize(asked["url"])
    except InvalidURL as exc:
        return {"url": asked["url"], "error": f"{exc.code}: {exc}"}, b""
    stored = {k: v for k, v in asked.items() if k != "url"}
    page = Page(project=project, url=url, url_key=url_key(url), host=server_of(url), depth=0, request=stored)
    response, how = trial_fetch(project, page, signer=draft_signer(source))
    report = {"url": url, "request": stored, "fetch": how, "status": response.status_code,
              "headers": masked_response_headers(response.headers),  # the site's Set-Cookie: its session
              "robots": robots_decision(project, url)}  # fmt: skip
    if response.error_code:
        return report | {"error": f"{response.error_code}: {response.error_message}"}, b""
    page.status_code, page.content_type = response.status_code, response.content_type
    report |= {"content_type": response.content_type, "text": _text(response.body)}
    if source.strip():
        report |= _draft_report(project, page, source, response)
    return report, response.body


def draft_signer(source: str) -> Signer | None:
    """The draft's sign() hook, run in the sandbox child on the request just before it is sent (as
    the fetch worker runs a spider's), or None when the draft defines none."""
    if not _DEFINES_SIGN.search(source):
        return None

    def sign(page: Page, request: FetchRequest) -> FetchRequest:
        asked = {"url": request.url, "method": request.method, "headers": request.headers, "stored": page.request,
                 "body_b64": base64.b64encode(request.body or b"").decode(), "priority": page.priority}  # fmt: skip
        answer = sandbox_run({"entry": "sign", "source": source, "request": asked}, limits=debug_limits())
        if answer.get("sign_error"):
            raise SignError(answer["sign_error"])
        out = answer.get("request")
        if out is None:  # no sign() after all, or a draft that does not compile (its run says so)
            return request
        body = base64.b64decode(out["body_b64"]) or None
        return dataclasses.replace(request, url=out["url"], method=out["method"], headers=out["headers"], body=body)

    return sign


def _draft_report(project: Project, page: Page, source: str, response) -> dict:
    answer = sources_run(
        {"draft": source},
        [
            sandbox_response(
                url=page.url,
                status=response.status_code,
                headers=response.headers,
                body=response.body,
                request=page.request,
            )
        ],
        limits=debug_limits(),
    )["draft"]
    if "error" in answer:
        return {"compile_error": answer["error"]}
    run = answer["runs"][0]
    return {
        "items": run["items"],
        "requests": followups(project, page, run["requests"]),
        "media": run["media"],
        "log": run["log"],
        "spider_error": run["error"],
    }


def followups(project: Project, page: Page, requests: list[dict]) -> list[dict]:
    """Each follow-up request with its fate as discovery and the fetch stage would decide it: new,
    known, out of scope, refused by robots.txt..."""
    links = [Link(r["url"], page.depth + 1, None, priority=r["priority"], request=r["request"]) for r in requests]
    fates = {f.url: f for f in link_fates(project, PageResult(page=page, changes={}, links=links))}
    shown = []
    for r in requests:
        fate = fates.get(r["url"])
        word = FATE_WORDS.get(fate.fate, fate.fate) if fate else "new"
        shown.append(r | {"fate": word, "reason": fate.reason if fate else ""})
    return shown


def _text(body: bytes) -> str:
    return body[:MAX_TEXT_CHARS].decode("utf-8", "replace")
