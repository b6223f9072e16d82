"""Re-extraction hands back the pages whose stored body is their latest answer: a page whose later
fetch failed (it answered 404) keeps its failure, not turned `done` with its old body's items."""

import pytest

from crawl.frontier.pages import pages_requeue
from crawl.models import Page, PageContent
from crawl.services.projects import project_get_or_create, seeds_add
from fetch.services import pages_fetch
from scrape.models import Item
from scrape.services import pages_extract, pages_reextract
from tests.servers import Site, SiteServer

pytestmark = pytest.mark.django_db
HTML = {"Content-Type": "text/html; charset=utf-8"}


def fetch_and_extract(page: Page) -> Page:
    pages_fetch(page_ids=[page.id])
    pages_extract(page_ids=[page.id])
    page.refresh_from_db()
    return page


def test_a_page_that_later_answered_404_keeps_its_failure_through_reextraction():
    site = Site(files={"/gone": (404, HTML, b"gone")})
    site.once["/gone"] = (200, HTML, b"<html><head><title>Old</title></head><body>old</body></html>")
    with SiteServer(site) as server:
        project = project_get_or_create(name="gone", allow_private=True, obey_robots=False, download_media=False)
        seeds_add(project=project, urls=[f"{server.url}/gone"])
        page = fetch_and_extract(Page.objects.get(project=project))
        assert (page.state, page.title) == ("done", "Old")
        pages_requeue(Page.objects.filter(id=page.id), from_states=("done",))
        page = fetch_and_extract(page)
    assert (page.state, page.status_code, page.error_code) == ("failed", 404, "http_404")
    assert pages_reextract(project=project) == 0
    pages_extract(page_ids=[page.id])
    page.refresh_from_db()
    assert (page.state, page.status_code, page.error_code) == ("failed", 404, "http_404")
    assert not PageContent.objects.filter(page=page).exists(), "the body of an earlier answer is dropped"


def test_a_page_whose_extraction_failed_is_extracted_again():
    site = Site(files={"/bin": (200, HTML, b"\x00\x01 binary served as html")})
    with SiteServer(site) as server:
        project = project_get_or_create(name="binary", allow_private=True, obey_robots=False, download_media=False)
        seeds_add(project=project, urls=[f"{server.url}/bin"])
        page = fetch_and_extract(Page.objects.get(project=project))
    assert (page.state, page.error_code) == ("failed", "not_html")
    assert pages_reextract(project=project) == 1
    assert Page.objects.get(id=page.id).state == "fetched"
    assert not Item.objects.filter(page=page).exists()
