"""A spider's @route handles the URLs its pattern matches whatever they answer: a JSON seed or a
followed JSON or XML URL reaches its method (not only a request that names a route=)."""

import zlib

import lxml.etree
import pytest

from core.canonical import url_key
from crawl.models import Page, PageContent, Project
from scrape.models import Item
from scrape.services import pages_extract
from scrape.spiders import Spider, register, route

pytestmark = pytest.mark.django_db


@register
class ApiRoutesSpider(Spider):
    name = "api-routes-test"

    @route(r"/api/")
    def api(self, response):
        if "json" in response.content_type:
            for record in response.json()["records"]:
                yield {"name": record["name"]}
        else:
            yield {"name": lxml.etree.fromstring(response.body).findtext("name")}


def fetched(project: Project, url: str, content_type: str, body: bytes) -> Page:
    page = Page.objects.create(
        project=project,
        url=url,
        url_key=url_key(url),
        host="api.test",
        state="fetched",
        status_code=200,
        content_type=content_type,
        is_seed=True,
    )
    PageContent.objects.create(page=page, headers={"content-type": content_type}, body=zlib.compress(body))
    return page


@pytest.mark.parametrize(
    ("url", "content_type", "body"),
    [
        ("http://api.test/api/lamps", "application/json", b'{"records": [{"name": "Anglepoise"}]}'),
        ("http://api.test/api/lamps.xml", "application/xml", b"<lamp><name>Anglepoise</name></lamp>"),
    ],
)
def test_a_json_or_xml_answer_whose_url_matches_a_route_reaches_the_spiders_method(url, content_type, body):
    project = Project.objects.create(name="routes", slug="routes", spider="api-routes-test")
    page = fetched(project, url, content_type, body)
    pages_extract(page_ids=[page.id])
    page.refresh_from_db()
    assert (page.state, page.parsed) == ("done", True)
    assert list(Item.objects.filter(page=page, kind="spider").values_list("data", flat=True)) == [
        {"name": "Anglepoise"}
    ]


def test_a_json_answer_no_route_matches_is_stored_not_parsed():
    project = Project.objects.create(name="other", slug="other", spider="api-routes-test")
    page = fetched(project, "http://api.test/data.json", "application/json", b'{"records": []}')
    pages_extract(page_ids=[page.id])
    page.refresh_from_db()
    assert (page.state, page.parsed) == ("done", False)
    assert not Item.objects.filter(page=page).exists()
