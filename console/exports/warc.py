"""WARC 1.1 export of a project's stored responses (warcio), one gzip member per record.

A warcinfo record comes first, then for each page with stored content (in id order) a `response`
record and its `request` record, both for the page's URL (a redirect is a row of its own, whose
stored response is the 3xx with its Location). crawlhub keeps the decoded body, the response
headers and the status code, not the bytes on the wire, so some parts are rebuilt at export time
and say so in a `WARC-Crawlhub-Reconstructed` header (explained in the warcinfo record):

- request: the whole record (method, target, Host and User-Agent from the project's settings;
  cookies and extra headers are left out, as they may hold credentials, and a POST body is written
  as the mask, `***`, as the API shows it: console/masking.py);
- response: the status line (protocol and reason phrase), and the framing headers: the body is
  stored decoded, so Content-Encoding moves to X-Crawlhub-Original-Content-Encoding,
  Transfer-Encoding is dropped and Content-Length is the decoded length. The cookies the site set
  (Set-Cookie) are written with their values masked, as everywhere else.
"""

import tempfile
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http import HTTPStatus
from importlib.metadata import version
from io import BytesIO
from typing import BinaryIO
from urllib.parse import urlsplit

from django.http import FileResponse
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from console.masking import MASK, masked_response_headers
from crawl.models import Page, PageContent, Project
from crawl.policy import user_agent_of

CHUNK = 25  # stored pages per query: bounded memory even when bodies are megabytes each
RECONSTRUCTED = "WARC-Crawlhub-Reconstructed"
FRAMING_HEADERS = {"content-encoding", "transfer-encoding", "content-length"}
WARC_1_1 = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"


def stored_count(project: Project) -> int:
    """Pages of the project with a stored response: the response records a WARC export holds."""
    return PageContent.objects.filter(page__project=project).count()


def write_warc(
    project: Project, out: BinaryIO, *, filename: str = "", on_page: Callable[[], None] | None = None
) -> int:
    """Write the project's stored responses to `out` as WARC 1.1; returns the response records
    written. `on_page` is called after each page (progress)."""
    writer = WARCWriter(out, gzip=True, warc_version="1.1")
    writer.write_record(writer.create_warcinfo_record(filename, _warcinfo(project)))
    agent, written = user_agent_of(project), 0
    for content in _stored_contents(project):
        _write_page(writer, content, agent)
        written += 1
        if on_page:
            on_page()
    return written


def _stored_contents(project: Project) -> Iterator[PageContent]:
    """Stored responses in page id order, CHUNK rows a query (keyset pagination: no offset scans)."""
    last_id = 0
    while True:
        chunk = list(
            PageContent.objects.filter(page__project=project, page_id__gt=last_id)
            .select_related("page")
            .order_by("page_id")[:CHUNK]
        )
        if not chunk:
            return
        last_id = chunk[-1].page_id
        yield from chunk


def _write_page(writer: WARCWriter, content: PageContent, agent: str) -> None:
    page = content.page
    date = _warc_date(page.fetched_at or page.updated_at)
    response = _response_record(writer, content, date)
    writer.write_record(response)
    writer.write_record(_request_record(writer, page, agent, date, response.rec_headers.get_header("WARC-Record-ID")))


def _response_record(writer: WARCWriter, content: PageContent, date: str):
    page, body = content.page, zlib.decompress(bytes(content.body))
    headers = masked_response_headers(content.headers)
    rebuilt = "status-line; framing-headers" + ("; masked-cookies" if headers != content.headers else "")
    return writer.create_warc_record(
        page.url,  # not final_url: a redirect's final_url is its Location, yet its 3xx came from page.url
        "response",
        payload=BytesIO(body),
        length=len(body),
        http_headers=response_head(page.status_code or 200, headers, len(body)),
        warc_headers_dict={"WARC-Type": "response", "WARC-Date": date, RECONSTRUCTED: rebuilt},
    )


def _request_record(writer: WARCWriter, page: Page, agent: str, date: str, response_id: str):
    method, body = page.request.get("method", "GET"), (MASK if page.request.get("body") else "").encode()
    return writer.create_warc_record(
        page.url,
        "request",
        payload=BytesIO(body),
        length=len(body),
        http_headers=request_head(page, method, agent, len(body)),
        warc_headers_dict={
            "WARC-Type": "request",
            "WARC-Date": date,
            "WARC-Concurrent-To": response_id,
            RECONSTRUCTED: "request",
        },
    )


def response_head(status: int, stored: dict, body_length: int) -> StatusAndHeaders:
    """The HTTP status line and stored headers, framed for the decoded body that follows."""
    headers = [(name, str(value)) for name, value in stored.items() if name.lower() not in FRAMING_HEADERS]
    encoding = next((v for k, v in stored.items() if k.lower() == "content-encoding"), "")
    if encoding:
        headers.append(("X-Crawlhub-Original-Content-Encoding", str(encoding)))
    headers.append(("Content-Length", str(body_length)))
    return StatusAndHeaders(f"{status} {_reason(status)}".strip(), headers, protocol="HTTP/1.1")


def request_head(page: Page, method: str, agent: str, body_length: int) -> StatusAndHeaders:
    parts = urlsplit(page.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = [("Host", parts.netloc.rpartition("@")[2]), ("User-Agent", agent)]
    if body_length:
        headers.append(("Content-Length", str(body_length)))
    return StatusAndHeaders(f"{method} {target} HTTP/1.1", headers, is_http_request=True)


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _warc_date(moment: datetime) -> str:
    return datetime_to_iso_date(moment.astimezone(UTC).replace(tzinfo=None), use_micros=True)


def _warcinfo(project: Project) -> dict:
    return {
        "software": f"crawlhub (warcio {version('warcio')})",
        "format": "WARC File Format 1.1",
        "conformsTo": WARC_1_1,
        "isPartOf": project.slug,
        "http-header-user-agent": user_agent_of(project),
        "robots": "obey" if project.obey_robots else "ignore",
        "description": (
            "Exported from stored responses after the crawl, not recorded on the wire. "
            f"{RECONSTRUCTED}: request = the request record is rebuilt (method, target, Host, User-Agent; "
            "no cookies or extra headers; a request body is written as ***); status-line = HTTP version "
            "and reason phrase are rebuilt from the status code; framing-headers = the body is stored "
            "decoded, so Content-Encoding moved to X-Crawlhub-Original-Content-Encoding, Transfer-Encoding "
            "is dropped and Content-Length is the decoded length; masked-cookies = the values of the "
            "cookies the site set (Set-Cookie) are written as ***. The status code is the page's last fetch."
        ),
    }


WARC_IN_MEMORY_BYTES = 16 * 2**20


def warc_response(project: Project) -> FileResponse:
    """The project's stored responses as one WARC file over HTTP (the API's export). The writer
    wants a file to append its gzip members to: a temporary one, in memory up to 16 MiB, then on
    disk, so a large project costs disk, not memory."""
    out = tempfile.SpooledTemporaryFile(max_size=WARC_IN_MEMORY_BYTES)
    name = f"{project.slug}.warc.gz"
    write_warc(project, out, filename=name)
    out.seek(0)
    return FileResponse(out, as_attachment=True, filename=name, content_type="application/warc")
