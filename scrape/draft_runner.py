"""The child process of the spider debugger: compiles spider sources and runs them on responses.

Run as `python -m scrape.draft_runner` by scrape/sandbox.py, under its time and memory limits: it
reads one JSON job on stdin and writes one JSON answer on stdout. Pure: no Django, no network, no
database; what it is handed is all it sees.

Its entry points (the job's "entry"):

    run    {"sources": {"draft": "<python>", ...}, "responses": [{"url", "status", "headers",
            "body_b64", "request"}]}
           -> {"<source name>": {"error": {"message", "line"}} | {"runs": [<run>, ...]}}
           <run> {"items", "requests", "media", "log", "error"}
    vet    {"source", "checks": [{"name", "url", "status", "headers", "body_b64", "request",
            "expected_items"}]}: what a deploy checks
           -> {"error": {"message", "line"}} | {"spider_name", "failures": ["<check>: <difference>"]}
    start  {"source"}: the spider's start() hook
           -> {"error": {...}} | {"requests": [...], "log": [...], "error": str | None}
    sign   {"source", "request": {"url", "method", "headers", "body_b64", "stored", "priority"}}:
           the spider's sign() hook on one request
           -> {"error": {...}} | {"request": {"url", "method", "headers", "body_b64"} | None,
               "sign_error": str | None}
"""

import base64
import json
import sys
import traceback

from scrape.spider_checks import check_failures, check_run
from scrape.spider_code import compile_spider
from scrape.spider_request import Request
from scrape.spiders import Response, Spider, run_spider, run_start


def source_filename(name: str) -> str:
    """The file name a source's tracebacks show: "<draft>", "<active>"."""
    return f"<{name}>"


def compile_error(exc: BaseException) -> dict:
    """Why a source does not compile (SpiderCodeError: its reason and line), as a deploy says it."""
    line = getattr(exc, "line", None)
    message = getattr(exc, "reason", None) or f"{type(exc).__name__}: {exc}"
    return {"message": message, "line": line if isinstance(line, int) else None}


def response_of(data: dict) -> Response:
    request = Request.from_page_request(data["url"], data.get("request") or {})
    body = base64.b64decode(data.get("body_b64") or "")
    return Response(url=data["url"], status=data.get("status") or 200, headers=data.get("headers") or {},
                    body=body, request=request)  # fmt: skip


def requests_report(requests: list[Request]) -> list[dict]:
    return [{"url": r.url, "priority": r.priority, "request": r.page_request()} for r in requests]


def log_report(log: list) -> list[dict]:
    return [{"at": x.at.isoformat(), "level": x.level, "message": x.message} for x in log]


def run_report(spider: Spider, response: Response) -> dict:
    """What the spider made of one response, as plain data."""
    result = run_spider(spider, response)
    return {
        "items": result.items,
        "requests": requests_report(result.requests),
        "media": [list(m) for m in result.media],
        "log": log_report(result.log),
        "error": result.error,
    }


def run_source(name: str, source: str, responses: list[Response]) -> dict:
    try:
        spider: Spider = compile_spider(source, filename=source_filename(name))()
    except Exception as exc:  # SpiderCodeError, or an error of the spider's own __init__
        return {"error": compile_error(exc)}
    return {"runs": [run_report(spider, response) for response in responses]}


def run_entry(job: dict) -> dict:
    responses = [response_of(r) for r in job["responses"]]
    return {name: run_source(name, source, responses) for name, source in job["sources"].items()}


def vet_entry(job: dict) -> dict:
    """A deploy's vetting: the source compiles to one spider with real routes, and its checks pass."""
    try:
        spider_cls = compile_spider(job["source"], filename="<deploy>")
    except Exception as exc:
        return {"error": compile_error(exc)}
    checks = [check | {"body": base64.b64decode(check.get("body_b64") or "")} for check in job.get("checks") or []]
    results = [check_run(spider_cls(), check) for check in checks]
    return {"spider_name": str(spider_cls.name or spider_cls.__qualname__), "failures": check_failures(results)}


def start_entry(job: dict) -> dict:
    try:
        spider = compile_spider(job["source"], filename="<spider>")()
    except Exception as exc:
        return {"error": compile_error(exc)}
    result = run_start(spider)
    return {"requests": requests_report(result.requests), "log": log_report(result.log), "error": result.error}


def sign_entry(job: dict) -> dict:
    try:
        spider = compile_spider(job["source"], filename="<draft>")()
    except Exception as exc:
        return {"error": compile_error(exc)}
    if not callable(getattr(spider, "sign", None)):
        return {"request": None, "sign_error": None}
    asked = job["request"]
    request = Request.from_page_request(asked["url"], asked.get("stored") or {}, asked.get("priority") or 0)
    request.method, request.headers = asked["method"], dict(asked["headers"])
    request.body = base64.b64decode(asked.get("body_b64") or "") or None
    try:
        out = spider.sign(request)
        if not isinstance(out, Request):
            raise TypeError(f"sign() must return a Request, not {type(out).__name__}")
        out = Request(out.url, method=out.method, headers=out.headers, body=out.body)  # checked as a new one is
    except Exception as exc:
        trace = traceback.format_exc(limit=-5)
        return {"request": None, "sign_error": f"spider_error: {type(exc).__name__}: {exc}\n{trace}"}
    body = base64.b64encode(out.body or b"").decode()
    return {"request": {"url": out.url, "method": out.method, "headers": out.headers, "body_b64": body},
            "sign_error": None}  # fmt: skip


ENTRIES = {"run": run_entry, "vet": vet_entry, "start": start_entry, "sign": sign_entry}


def main() -> None:
    job, out = json.load(sys.stdin), sys.stdout
    sys.stdout = sys.stderr  # what the code prints must not spoil the answer
    answer = ENTRIES[job.get("entry", "run")](job)
    out.write(json.dumps(answer, ensure_ascii=False, default=str))


if __name__ == "__main__":
    main()
