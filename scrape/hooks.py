"""A spider's two hooks besides its handlers: start(), whose requests join the frontier when a job
of its project starts (pyspider's on_start), and sign(request), run in the fetch worker on each of
its project's requests just before it is sent (a fresh timestamp or HMAC per request).

A job may be started by the web process (the API, the admin): a deployed version's start() runs in
the sandbox's child (scrape/sandbox.py: no database, broker or secret, a time and a memory limit),
never in the process that starts the job. A built-in spider (CRAWL_SPIDER_MODULES) is installed
code, as trusted as crawlhub's own, and runs in the process.

The fetch stage (crawl/) cannot import a spider: it asks through crawl.signals.request_signer,
which scrape/apps.py connects to spider_signer."""

import dataclasses
import logging

from core.net.client import FetchRequest
from crawl.frontier.discovery import requests_enqueue
from crawl.frontier.verdicts import Link
from crawl.models import Page, Project

from .sandbox import SandboxStopped, sandbox_run
from .spider_versions import has_spider, project_spider, sandbox_limits, version_source
from .spiders import Request, Spider, SpiderError, run_start

log = logging.getLogger("crawlhub.spiders")


def _spider_of(project: Project) -> Spider | None:
    if not has_spider(project):
        return None
    try:
        return project_spider(project)
    except SpiderError:
        return None  # the extract stage reports an unknown spider on every page


def spider_start(*, project: Project) -> list[int]:
    """Run the project's spider's start() hook, if it has one, and put its requests in the frontier
    as the seeds are (they need not be in scope; what they lead to must be). Returns the ids of the
    new rows. A hook that fails, or is stopped at the sandbox's limits, is logged (the job's log)
    and adds nothing; the seeds still go."""
    if project.spider_version_id is not None:
        started = _start_sandboxed(project)
    else:
        started = _start_builtin(project)
    if started is None:
        return []
    links = [Link(r["url"], 0, priority=r["priority"], request=r["request"]) for r in started]
    return requests_enqueue(project, links)


def _start_sandboxed(project: Project) -> list[dict] | None:
    _, source = version_source(project.spider_version_id)
    try:
        answer = sandbox_run({"entry": "start", "source": source}, limits=sandbox_limits())
    except SandboxStopped as exc:
        log.warning("the start() hook of spider version %s was %s", project.spider_version_id, exc)
        return None
    if "error" in answer and isinstance(answer["error"], dict):
        log.warning("spider version %s does not compile: %s", project.spider_version_id, answer["error"]["message"])
        return None
    return _started(project, answer["log"], answer["error"], answer["requests"])


def _start_builtin(project: Project) -> list[dict] | None:
    spider = _spider_of(project)
    if spider is None or not callable(getattr(spider, "start", None)):
        return None
    result = run_start(spider)
    logged = [{"level": x.level, "message": x.message} for x in result.log]
    requests = [{"url": r.url, "priority": r.priority, "request": r.page_request()} for r in result.requests]
    return _started(project, logged, result.error, requests)


def _started(project: Project, logged: list[dict], error: str | None, requests: list[dict]) -> list[dict] | None:
    for line in logged:
        log.log(logging.getLevelName(line["level"]), "start(): %s", line["message"])
    if error:
        log.warning("the start() hook of spider %s failed: %s", project.spider or project.spider_version_id, error)
        return None
    return requests


def spider_signer(sender, *, project: Project, **kwargs):
    """request_signer's receiver: the sign() hook of the project's spider as the fetch stage's
    signer, or None when it has none."""
    spider = _spider_of(project)
    if spider is None or not callable(getattr(spider, "sign", None)):
        return None

    def sign(page: Page, fetch_request: FetchRequest) -> FetchRequest:
        request = Request.from_page_request(fetch_request.url, page.request, page.priority)
        request.method, request.headers = fetch_request.method, dict(fetch_request.headers)
        request.body = fetch_request.body
        out = spider.sign(request)
        if not isinstance(out, Request):
            raise TypeError(f"sign() must return a Request, not {type(out).__name__}")
        checked = Request(out.url, method=out.method, headers=out.headers, body=out.body)  # as a new one is
        return dataclasses.replace(
            fetch_request, url=checked.url, method=checked.method, headers=checked.headers, body=checked.body
        )

    return sign
