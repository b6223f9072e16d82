"""A project with download_media off downloads nothing: the media its rule sets' ID scraper and its
spider's Media() ask for are listed on the page's item, and no asset is queued."""

import zlib

import pytest

from core.canonical import url_key
from crawl.models import MediaAsset, Page, PageContent, Project
from scrape.models import Item, RuleSet
from scrape.services import pages_extract
from scrape.spiders import Media, Spider, register, route

pytestmark = pytest.mark.django_db
URL = "http://shop.test/product/7"
HTML = b"""<html><body><h1>Lamp</h1><p class="sku">item-7</p>
<img src="/img/lamp.jpg"><a href="/manual.pdf">manual</a></body></html>"""
ID_RULES = {"id_regex": r"item-(\d+)", "download_url_fmt": "http://shop.test/files/{id}.zip"}


@register
class MediaSpider(Spider):
    name = "media-off-test"

    @route(r"/product/")
    def product(self, response):
        yield {"title": response.xpath("string(//h1)")}
        yield Media("/video/7.mp4", "video")


def fetched_page(project: Project, url: str, body: bytes, content_type: str = "text/html") -> Page:
    page = Page.objects.create(
        project=project,
        url=url,
        url_key=url_key(url),
        host="shop.test",
        state="fetched",
        status_code=200,
        content_type=content_type,
    )
    PageContent.objects.create(page=page, headers={"content-type": content_type}, body=zlib.compress(body))
    return page


@pytest.mark.parametrize("download", [False, True])
def test_media_off_records_what_rules_and_spiders_ask_for_and_queues_nothing(download):
    project = Project.objects.create(
        name="media", slug="media", spider="media-off-test", download_media=download, media_kinds="image,video,file"
    )
    RuleSet.objects.create(project=project, name="ids", spec=ID_RULES)
    page = fetched_page(project, URL, HTML)
    pages_extract(page_ids=[page.id])
    asked = {"http://shop.test/files/7.zip", "http://shop.test/video/7.mp4"}
    assets = set(MediaAsset.objects.filter(project=project).values_list("url", flat=True))
    page.refresh_from_db()
    if download:
        assert asked <= assets and page.state == "extracted"  # waiting for its downloads
        return
    assert assets == set() and page.state == "done"
    listed = Item.objects.get(page=page, kind="page").data["media"]
    assert asked <= set(listed) and "http://shop.test/img/lamp.jpg" in listed


def test_media_off_lists_a_routed_answers_media_on_an_item_of_its_own():
    project = Project.objects.create(name="api", slug="api", spider="media-off-test", download_media=False)
    page = fetched_page(project, "http://shop.test/product/8.json", b'{"n": 8}', "application/json")
    Page.objects.filter(id=page.id).update(request={"route": "product"})
    pages_extract(page_ids=[page.id])
    assert not MediaAsset.objects.filter(project=project).exists()
    assert Item.objects.get(page=page, kind="media").data["media"] == ["http://shop.test/video/7.mp4"]
