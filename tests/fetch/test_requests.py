"""Request control per project and per seed, seen from the server's side: headers, cookies, user
agent, POST with a body, and a proxy (a small forward proxy on loopback)."""

import pytest
from django.conf import settings

from core.net.guard import allow_networks
from crawl.models import Page, Seed
from crawl.services.projects import project_get_or_create, seeds_add
from fetch.services import pages_fetch
from tests.servers import Site, SiteServer


@pytest.fixture
def recorder():
    """An HTTP/1.1 server on 127.0.0.1 that records each request and answers any of them."""
    with SiteServer(
        Site(default=(200, {"Content-Type": "text/html"}, b"<html><body>recorded</body></html>"))
    ) as server:
        yield server


def test_it_sends_the_projects_and_the_seeds_own_request_settings(db, recorder):
    project = project_get_or_create(
        name="control",
        allow_private=True,
        obey_robots=False,
        user_agent="control-bot/1.0",
        request_headers={"Accept-Language": "fr"},
        cookies={"session": "abc", "theme": "dark"},
    )
    url = f"http://127.0.0.1:{recorder.port}/api/search"
    Seed.objects.create(
        project=project,
        url=url,
        method="POST",
        body='{"q": "crawler"}',
        headers={"Content-Type": "application/json", "X-Api-Key": "k1"},
    )
    ids = seeds_add(project=project, urls=[])
    assert pages_fetch(page_ids=ids) == ids
    (request,) = recorder.requests
    assert request.line == "POST /api/search HTTP/1.1"
    assert request.body == b'{"q": "crawler"}'
    headers = request.headers
    assert headers["User-Agent"] == "control-bot/1.0"
    assert headers["Accept-Language"] == "fr"
    assert sorted(headers["Cookie"].split("; ")) == ["session=abc", "theme=dark"]
    assert (headers["Content-Type"], headers["X-Api-Key"]) == ("application/json", "k1")


def test_it_sends_requests_through_the_projects_proxy(db, recorder):
    """The egress gate resolves and checks the target, then asks the project's proxy for the
    checked address (127.0.0.2 stands for a public one here); the Host header keeps the name."""
    allow_networks(["127.0.0.2/32"])
    try:
        project = project_get_or_create(name="proxied", obey_robots=False, proxy=f"http://127.0.0.1:{recorder.port}")
        ids = seeds_add(project=project, urls=["http://127.0.0.2:9/page.html"])
        assert pages_fetch(page_ids=ids) == ids
        doomed = seeds_add(project=project, urls=["http://example.test/page.html"])  # a name only a proxy knows
        pages_fetch(page_ids=doomed)
    finally:
        allow_networks(settings.CRAWL_ALLOWED_NETWORKS)
    (request,) = recorder.requests
    assert request.line == "GET http://127.0.0.2:9/page.html HTTP/1.1", "absolute-form: a forward proxy request"
    assert Page.objects.get(id=ids[0]).status_code == 200
    assert Page.objects.get(id=doomed[0]).error_code == "dns_error"  # unchecked names are never handed on
