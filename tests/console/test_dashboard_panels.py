"""The dashboard's error panels and throughput chart while a site is down: pages waiting to retry
count as errors, failed fetches are not drawn as fetched pages, and 304s are."""

import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone

from console.dashboard import dashboard_snapshot
from core.net.client import FetchResponse
from crawl.frontier import stages
from crawl.frontier.pages import pages_claim_for_fetch, pages_finish
from crawl.models import Page
from fetch.outcomes import outcome

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(make_project):
    return make_project(name="down shop", allow_private=True)


def queued_pages(project, host: str, n: int, **fields) -> list[int]:
    ids = []
    for i in range(n):
        url = f"http://{host}/p{i}"
        key = hashlib.sha256(url.encode()).hexdigest()
        page = Page.objects.create(
            project=project, url=url, url_key=key, host=host, state="queued", next_fetch_at=timezone.now(), **fields
        )
        ids.append(page.id)
    return ids


def fetched(ids: list[int], response_of, django_capture_on_commit_callbacks) -> None:
    """The fetch stage's write of one batch: the verdict on each page's response, and its counters."""
    with django_capture_on_commit_callbacks(execute=True):
        token, pages = pages_claim_for_fetch(ids)
        pages_finish(token=token, stage=stages.FETCH, verdicts=[(p, outcome(p, response_of(p))) for p in pages])


def refused(page: Page) -> FetchResponse:
    return FetchResponse(url=page.url, error_code="connect_error", error_message="connection refused")


def not_modified(page: Page) -> FetchResponse:
    return FetchResponse(url=page.url, status_code=304)


def test_it_shows_pages_retrying_while_their_site_is_down(project, django_capture_on_commit_callbacks):
    fetched(queued_pages(project, "down.test", 3), refused, django_capture_on_commit_callbacks)
    assert Page.objects.filter(project=project, state="queued").exclude(error_code="").count() == 3, "retrying"

    data = dashboard_snapshot(project)
    assert data["errors_by_code"] == [("connect_error", 3, 3)]
    assert data["errors_by_host"] == [("down.test", 3, 3)]
    assert len(data["recent_failures"]) == 3
    assert {(f["error_code"], f["retrying"] is not None) for f in data["recent_failures"]} == {("connect_error", True)}


def test_it_draws_failed_fetches_apart_and_counts_304s_as_answered(project, django_capture_on_commit_callbacks):
    fetched(queued_pages(project, "down.test", 3), refused, django_capture_on_commit_callbacks)
    earlier = timezone.now() - timedelta(days=1)
    fresh = queued_pages(project, "up.test", 2, fetched_at=earlier, etag='"v1"', content_sha256="0" * 64)
    fetched(fresh, not_modified, django_capture_on_commit_callbacks)

    points = dashboard_snapshot(project)["throughput"]
    assert len(points) == 60
    assert sum(p["pages"] for p in points) == 2, "the two 304s were answered"
    assert sum(p["failed"] for p in points) == 3, "the three refused fetches were not"


def test_it_says_why_each_of_its_hosts_is_slow_and_until_when(project, make_project):
    """One line per host of the project that something slows: throttled after 429s (until the quiet
    period ends), down (probed), or held by a Retry-After; not other projects' hosts."""
    from crawl.hosts.politeness import host_back_off, hosts_note_failures, hosts_throttle
    from crawl.models import Host

    for host in ("busy.test", "down.test", "asked.test", "fine.test"):
        queued_pages(project, host, 1)
    queued_pages(make_project(name="other"), "elsewhere.test", 1)
    hosts_throttle(slowed={"busy.test", "elsewhere.test"}, reasons={"busy.test": "HTTP 503 without Retry-After"})
    for _ in range(3):
        hosts_note_failures(robots_unreadable=set(), unreachable={"down.test"})
    host_back_off(host="asked.test", seconds=120, status=429)
    Host.objects.create(host="fine.test")
    lines = {h["host"]: h for h in dashboard_snapshot(project)["slow_hosts"]}
    assert set(lines) == {"asked.test", "busy.test", "down.test"}
    assert lines["busy.test"]["why"].startswith("slowed down after HTTP 503 without Retry-After: +1 s between requests")
    assert lines["busy.test"]["delay"] == 1.0 and lines["busy.test"]["until"]
    assert lines["down.test"]["why"].startswith("down since ") and "probed every" in lines["down.test"]["why"]
    assert "HTTP 429 with Retry-After; held until" in lines["asked.test"]["why"]
