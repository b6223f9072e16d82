"""WARC export: read back with warcio (digests checked), record by record against the stored rows."""

import gzip
import io
import subprocess
import sys
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from warcio.archiveiterator import ArchiveIterator

from bench.truth import ground_truth
from core.canonical import url_key
from crawl.models import Page, PageContent
from crawl.services.projects import project_get_or_create
from tests.conftest import BASE_DIR, generated_site, last_json_line, run_manage
from tests.servers import SiteServer


@dataclass
class Record:
    type: str
    warc: object  # warcio StatusAndHeaders of the WARC header block
    http: object  # warcio StatusAndHeaders of the HTTP head, None for warcinfo
    payload: bytes


def read_warc(stream) -> list[Record]:
    """Every record, its payload read in full so warcio verifies both digests (raising on a mismatch)."""
    return [
        Record(r.rec_type, r.rec_headers, r.http_headers, r.content_stream().read())
        for r in ArchiveIterator(stream, check_digests="raise")
    ]


def gzip_members(data: bytes) -> int:
    members = 0
    while data:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        inflater.decompress(data)
        data, members = inflater.unused_data, members + 1
    return members


def stored_page(project, path: str, body: bytes, headers: dict, **fields) -> Page:
    url = f"http://a.test{path}"
    page = Page.objects.create(project=project, url=url, url_key=url_key(url), host="a.test", **fields)
    PageContent.objects.create(page=page, headers=headers, body=zlib.compress(body))
    return page


def test_it_writes_a_warcinfo_then_a_response_and_a_reconstructed_request_per_stored_page(db, tmp_path):
    project = project_get_or_create(name="warcunit", user_agent="warc-bot/1.0")
    fetched_at = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    html = "<p>café</p>".encode()
    encoded = {"content-type": "text/html", "content-encoding": "gzip", "transfer-encoding": "chunked"}
    stored_page(project, "/x?q=1", html, encoded | {"content-length": "31"}, status_code=200, fetched_at=fetched_at)
    post = {"method": "POST", "body": '{"q": 1}', "headers": {"X-Api-Key": "secret"}}
    stored_page(project, "/api", b'{"ok": true}', {"content-type": "application/json"}, status_code=201, request=post)
    Page.objects.create(project=project, url="http://a.test/none", url_key=url_key("http://a.test/none"), host="a.test")
    stored_page(project_get_or_create(name="elsewhere"), "/other", b"other", {}, status_code=200)

    out, err = tmp_path / "unit.warc.gz", io.StringIO()
    call_command("export", "warcunit", "--format", "warc", "--output", str(out), stderr=err)
    assert err.getvalue().strip() == f"warcunit: exported 2 stored pages as warc to {out}"
    assert gzip_members(out.read_bytes()) == 5, "one gzip member per record"
    info, response, request, api_response, api_request = read_warc(out.open("rb"))

    assert (info.type, info.warc.protocol, info.warc.get_header("WARC-Filename")) == ("warcinfo", "WARC/1.1", out.name)
    assert b"isPartOf: warcunit" in info.payload and b"WARC-Crawlhub-Reconstructed: request" in info.payload
    assert (response.type, response.warc.get_header("WARC-Target-URI")) == ("response", "http://a.test/x?q=1")
    assert response.warc.get_header("WARC-Date") == "2026-01-02T03:04:05.123456Z"
    assert response.http.statusline == "200 OK" and response.payload == html
    assert response.http.get_header("Content-Length") == str(len(html))
    assert response.http.get_header("X-Crawlhub-Original-Content-Encoding") == "gzip"
    assert [response.http.get_header(h) for h in ("Content-Encoding", "Transfer-Encoding")] == [None, None]

    assert request.type == "request" and request.warc.get_header("WARC-Crawlhub-Reconstructed") == "request"
    assert request.warc.get_header("WARC-Concurrent-To") == response.warc.get_header("WARC-Record-ID")
    assert request.warc.get_header("WARC-Date") == response.warc.get_header("WARC-Date")
    assert (request.http.protocol, request.http.statusline) == ("GET", "/x?q=1 HTTP/1.1")
    assert request.http.headers == [("Host", "a.test"), ("User-Agent", "warc-bot/1.0")]

    assert (api_response.http.statusline, api_response.payload) == ("201 Created", b'{"ok": true}')
    assert (api_request.http.protocol, api_request.payload) == ("POST", b"***"), "a body is masked"
    assert api_request.http.get_header("X-Api-Key") is None, "seed headers may hold credentials"


def test_it_masks_a_seeds_post_body_and_the_cookies_the_site_set(db, tmp_path):
    """Issue 47, point 1: the WARC masks what the API masks."""
    project = project_get_or_create(name="warcsecret")
    login = {"method": "POST", "body": "user=me&password=body-s3cret"}
    cookies = {"content-type": "text/html", "set-cookie": "sid=cookie-s3cret; Path=/; HttpOnly, lang=en-s3cret"}
    stored_page(project, "/login", b"welcome", cookies, status_code=200, request=login)
    out = tmp_path / "secret.warc.gz"
    call_command("export", "warcsecret", "--format", "warc", "--output", str(out), stderr=io.StringIO())
    _, response, request = read_warc(out.open("rb"))
    assert request.payload == b"***" and request.http.get_header("Content-Length") == "3"
    assert response.http.get_header("Set-Cookie") == "sid=***; Path=/; HttpOnly, lang=***"
    assert "masked-cookies" in response.warc.get_header("WARC-Crawlhub-Reconstructed")
    assert b"s3cret" not in gzip.decompress(out.read_bytes())


def test_it_refuses_a_warc_of_anything_but_pages(db, tmp_path):
    project_get_or_create(name="warcwhat")
    with pytest.raises(CommandError, match="a WARC holds stored pages"):
        call_command("export", "warcwhat", "--what", "items", "--format", "warc", "--output", str(tmp_path / "x"))


@pytest.mark.integration
def test_a_distributed_crawl_exports_one_response_per_stored_page(workers, worker_env, tmp_path):
    site = generated_site(60, seed=11)
    with SiteServer.generated(site) as server:
        for stage in ("fetch", "extract", "download"):
            workers.start(stage, stage)
        args = ["crawl", f"{server.url}/", "--allow-private", "--json", "--workers", "0", "--project", "warc"]
        done = run_manage([*args, "--timeout", "240"], worker_env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert last_json_line(done.stdout)["completed"] is True

    out = tmp_path / "console.warc.gz"
    exported = run_manage(["export", "warc", "--format", "warc", "--output", str(out)], worker_env)
    assert exported.returncode == 0, exported.stderr
    stored = {c.page.url: c for c in PageContent.objects.filter(page__project__slug="warc").select_related("page")}
    assert {url.removeprefix(server.url) for url in stored} >= set(ground_truth(site)["pages"])
    records = read_warc(out.open("rb"))
    assert records[0].type == "warcinfo" and [r.type for r in records[1:]].count("warcinfo") == 0

    responses = [r for r in records if r.type == "response"]
    assert len(responses) == len(stored) == PageContent.objects.filter(page__project__slug="warc").count()
    assert sorted(r.warc.get_header("WARC-Target-URI") for r in responses) == sorted(stored)
    for record in responses:
        content = stored[record.warc.get_header("WARC-Target-URI")]
        assert record.payload == zlib.decompress(bytes(content.body))
        assert record.http.get_statuscode() == str(content.page.status_code)
    response_ids = {r.warc.get_header("WARC-Record-ID") for r in responses}
    requests = [r for r in records if r.type == "request"]
    assert {r.warc.get_header("WARC-Concurrent-To") for r in requests} == response_ids
    assert len(requests) == len(responses)

    piped = subprocess.run(
        [sys.executable, "manage.py", "export", "warc", "--format", "warc"],
        cwd=BASE_DIR,
        env=worker_env,
        capture_output=True,
        timeout=120,
    )
    assert piped.returncode == 0, piped.stderr
    from_stdout = [r for r in read_warc(io.BytesIO(piped.stdout)) if r.type == "response"]
    assert sorted((r.warc.get_header("WARC-Target-URI"), r.payload) for r in from_stdout) == sorted(
        (r.warc.get_header("WARC-Target-URI"), r.payload) for r in responses
    )


def test_the_api_exports_the_stored_pages_as_the_command_does(db, admin_client):
    project = project_get_or_create(name="warcapi")
    stored_page(
        project, "/a", b"<p>a</p>", {"content-type": "text/html"}, status_code=200, fetched_at=datetime.now(UTC)
    )
    response = admin_client.get("/api/projects/warcapi/export/", {"format": "warc"})
    assert response.status_code == 200 and response["Content-Type"] == "application/warc"
    assert 'filename="warcapi.warc.gz"' in response["Content-Disposition"]
    records = read_warc(io.BytesIO(b"".join(response.streaming_content)))
    assert [r.type for r in records] == ["warcinfo", "response", "request"]
    assert records[1].payload == b"<p>a</p>"
    refused = admin_client.get("/api/projects/warcapi/export/", {"format": "warc", "what": "items"})
    assert refused.status_code == 400 and "what" in refused.json()
