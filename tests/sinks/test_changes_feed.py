"""The change feed (/api/changes/) as programs read it: with a token (401, never a redirect, without
one), described in the OpenAPI schema, continued by an opaque cursor that reads every version exactly
once, however versions are written while it is read, JSON API pages included."""

import json
import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from console.runs.control import pages_recrawl
from core.canonical import url_key
from crawl.models import Page, PageVersion
from crawl.services.freshness import versions_record
from crawl.services.projects import project_get_or_create, seeds_add
from fetch.services import pages_fetch
from scrape.services import pages_extract
from tests.helpers import wait_until
from tests.servers import Site, SiteServer


@pytest.fixture
def api(django_user_model) -> APIClient:
    user = django_user_model.objects.create_user("indexer", password="not-used", is_superuser=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def make_pages(n: int) -> list[Page]:
    project = project_get_or_create(name="news", allow_private=True)
    pages = []
    for i in range(n):
        url = f"http://news.test/{i}"
        pages.append(Page.objects.create(project=project, url=url, url_key=url_key(url), host="news.test"))
    return pages


def write_versions(pages: list[Page], fetched_at, tag: str) -> bool:
    """New versions of the pages, as the extract stage writes them (in its transaction)."""
    with transaction.atomic():
        for page in pages:
            page.fetched_at, page.content_sha256 = fetched_at, "0" * 64
        versions_record([(p, {"text_hash": f"{tag}-{p.id}", "title": tag}, tag) for p in pages])
    return True


def read_all(api: APIClient, cursor: str | None = None, page_size: int = 3, between=lambda: False) -> list[dict]:
    """Follow next_cursor until the feed says no more and `between`, called after every answer, wrote
    nothing new."""
    read = []
    while True:
        params = {"page_size": page_size} | ({"cursor": cursor} if cursor else {})
        answer = api.get("/api/changes/", params)
        assert answer.status_code == 200, answer.content
        body = answer.json()
        read += body["changes"]
        cursor = body["next_cursor"]
        wrote = between()
        if not body["more"] and not wrote:
            return read, cursor


def test_a_token_reads_the_feed_and_no_or_a_bad_token_gets_a_401_not_a_redirect(api, db):
    make_pages(1)
    assert api.get("/api/changes/").status_code == 200
    for credentials in ({}, {"HTTP_AUTHORIZATION": "Token not-a-token"}):
        answer = APIClient().get("/api/changes/", **credentials)
        assert answer.status_code == 401 and answer["WWW-Authenticate"] == "Token", credentials
    assert api.get("/api/changes/", {"cursor": "not-ours"}).status_code == 400
    assert "cursor" in api.get("/api/changes/", {"cursor": "djE6eA"}).json()  # "v1:x"
    assert api.get("/api/changes/", {"page_size": 0}).status_code == 400


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("since", "0001-01-01T00:00:00+14:00"),  # before the first UTC instant
        ("since", "9999-12-31T23:59:59-14:00"),  # after the last one
        ("since", "2026-13-45T00:00:00"),
        ("since", "2026-02-30"),
        ("since", "²026-01-01T00:00:00Z"),
        ("page_size", "²"),
        ("page_size", "١٠"),  # Arabic-Indic digits
        ("page_size", "9" * 5000),
    ],
)
def test_a_bad_since_or_page_size_is_a_400_naming_the_parameter(api, db, name, value):
    make_pages(1)
    answer = api.get("/api/changes/", {name: value})
    assert answer.status_code == 400, answer.content
    assert name in answer.json()


def test_the_feed_is_described_in_the_openapi_schema(api, db):
    schema = api.get("/api/schema/", {"format": "json"}).json()
    feed = schema["paths"]["/api/changes/"]["get"]
    assert {p["name"] for p in feed["parameters"]} >= {"cursor", "project", "since", "page_size"}
    shape = feed["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert set(schema["components"]["schemas"][shape]["properties"]) == {"changes", "next_cursor", "more"}


def test_every_version_is_read_once_across_pages_written_while_it_is_read(api, db):
    pages = make_pages(12)
    now = timezone.now()
    write_versions(pages[:5], now, "first")  # five versions sharing one timestamp: a page ends inside them
    rounds = iter(
        [
            lambda: write_versions(pages[5:7], now, "same-instant"),  # the same timestamp, written later
            lambda: write_versions(pages[7:9], now - timedelta(hours=1), "fetched-earlier"),  # extracted late
            lambda: write_versions(pages[9:12], now + timedelta(seconds=1), "later"),
            lambda: write_versions(pages[:2], now, "second"),  # pages already read change again
        ]
    )
    read, cursor = read_all(api, between=lambda: next(rounds, lambda: False)())
    everything = list(PageVersion.objects.order_by("id").values_list("id", flat=True))
    assert len(everything) == 14
    assert [c["id"] for c in read] == everything, "every version once, in the order written"
    write_versions(pages[3:4], now - timedelta(days=1), "after-the-end")
    more, _ = read_all(api, cursor)
    assert [c["title"] for c in more] == ["after-the-end"], "the last cursor reads on later"
    assert read_all(api, cursor=None, page_size=1000)[0][-1]["title"] == "after-the-end"


def test_the_since_parameter_starts_the_feed_and_a_project_narrows_it(api, db):
    pages = make_pages(3)
    now = timezone.now()
    write_versions(pages[:1], now - timedelta(days=2), "old")
    write_versions(pages[1:], now, "new")
    since = (now - timedelta(days=1)).isoformat()
    assert [c["title"] for c in api.get("/api/changes/", {"since": since}).json()["changes"]] == ["new", "new"]
    assert api.get("/api/changes/", {"project": "elsewhere"}).json()["changes"] == []
    assert len(api.get("/api/changes/", {"project": "news"}).json()["changes"]) == 3


def test_a_version_committed_late_is_not_skipped_by_a_reader_that_saw_a_later_one(api, transactional_db):
    """Two extract transactions write versions at once: the one that took its id first commits last.
    The feed must not serve the second one's version before the first's is committed."""
    pages = make_pages(2)
    hold, holding = threading.Event(), threading.Event()

    def slow_writer():
        try:
            with transaction.atomic():
                write_versions(pages[:1], timezone.now(), "committed-late")
                holding.set()
                hold.wait(30)
        finally:
            connection.close()

    def quick_writer():
        try:
            write_versions(pages[1:], timezone.now(), "committed-first")
        finally:
            connection.close()

    slow = threading.Thread(target=slow_writer)
    slow.start()
    assert holding.wait(30)
    quick = threading.Thread(target=quick_writer)
    quick.start()
    wait_until(
        lambda: not quick.is_alive() or _waiting_for_an_advisory_lock(),
        timeout=30,
        interval=0.05,
        what="the quick writer to wait for the advisory lock (or to finish)",
    )
    first, cursor = read_all(api)
    hold.set()
    slow.join(30)
    quick.join(30)
    rest, _ = read_all(api, cursor)
    titles = [c["title"] for c in first + rest]
    assert sorted(titles) == ["committed-first", "committed-late"], f"read {titles}"


def _waiting_for_an_advisory_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
        return cursor.fetchone()[0] > 0


def test_json_api_pages_make_versions_in_the_feed(api, db):
    config = {"records": "data", "fields": {"id": "id", "name": "name"}}
    project = project_get_or_create(name="api feed", allow_private=True, api_config=config)
    site = Site()
    site.files["/robots.txt"] = (404, {"Content-Type": "text/plain"}, b"")

    def publish(names: list[str]) -> None:
        body = json.dumps({"data": [{"id": i, "name": n} for i, n in enumerate(names)]}).encode()
        site.files["/items.json"] = (200, {"Content-Type": "application/json"}, body)

    with SiteServer(site) as server:
        (page_id,) = seeds_add(project=project, urls=[f"{server.url}/items.json"])
        for names in (["kettle"], ["kettle"], ["kettle", "teapot"]):  # the second crawl changes nothing
            publish(names)
            pages_recrawl(project=project)
            assert pages_fetch(page_ids=[page_id]) in ([page_id], [])
            pages_extract(page_ids=[page_id])
    changes = api.get("/api/changes/", {"project": project.slug}).json()["changes"]
    assert [(c["page_id"], c["content_type"]) for c in changes] == [(page_id, "application/json")] * 2
    newest = PageVersion.objects.filter(page_id=page_id).last()
    assert '"teapot"' in newest.text, "the version's text is the records, for a diff"
