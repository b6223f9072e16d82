"""The child process of the spider debugger: compiles spider sources and runs them on responses.

Run as `python -m scrape.draft_runner` by scrape/sandbox.py, under its time and memory limits: it
reads one JSON job on stdin and writes one JSON answer on stdout. Pure: no Django, no network, no
database; what it is handed is all it sees.

    job    {"sources": {"draft": "<python>", ...}, "responses": [{"url", "status", "headers",
            "body_b64", "request"}]}
    answer {"<source name>": {"error": {"message", "line"}} | {"runs": [<run>, ...]}}
    run    {"items", "requests", "media", "log", "error"}
"""

import base64
import json
import sys

from scrape.spider_code import compile_spider
from scrape.spider_request import Request
from scrape.spiders import Response, Spider, run_spider


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


def run_report(spider: Spider, response: Response) -> dict:
    """What the spider made of one response, as plain data."""
    result = run_spider(spider, response)
    requests = [{"url": r.url, "priority": r.priority, "request": r.page_request()} for r in result.requests]
    return {
        "items": result.items,
        "requests": requests,
        "media": [list(m) for m in result.media],
        "log": [{"at": x.at.isoformat(), "level": x.level, "message": x.message} for x in result.log],
        "error": result.error,
    }


def run_source(name: str, source: str, responses: list[Response]) -> dict:
    try:
        spider: Spider = compile_spider(source, filename=source_filename(name))()
    except Exception as exc:  # SpiderCodeError, or an error of the spider's own __init__
        return {"error": compile_error(exc)}
    return {"runs": [run_report(spider, response) for response in responses]}


def main() -> None:
    job, out = json.load(sys.stdin), sys.stdout
    sys.stdout = sys.stderr  # what the code prints must not spoil the answer
    responses = [response_of(r) for r in job["responses"]]
    answer = {name: run_source(name, source, responses) for name, source in job["sources"].items()}
    out.write(json.dumps(answer, ensure_ascii=False, default=str))


if __name__ == "__main__":
    main()
