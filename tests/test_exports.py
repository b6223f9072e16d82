"""Exports stream in bounded chunks: every asset once, each with all the pages that reference it."""

from console.exports import export_rows
from crawl.models import Page
from crawl.services.projects import project_get_or_create
from media.models import MediaAsset, PageAsset


def test_it_exports_every_asset_with_its_pages_across_chunk_boundaries(db):
    project = project_get_or_create(name="exports")
    pages = Page.objects.bulk_create(
        [Page(project=project, url=f"http://a.test/p{i}", url_key=f"{i:064d}", host="a.test") for i in range(3)]
    )
    assets = MediaAsset.objects.bulk_create(
        [MediaAsset(project=project, url=f"http://a.test/i{i}.jpg", url_key=f"{i:064x}") for i in range(1203)]
    )
    PageAsset.objects.bulk_create([PageAsset(page=p, asset=a) for a in assets for p in pages[: 1 + a.id % 3]])
    rows = list(export_rows(project, "assets"))
    assert [r["url"] for r in rows] == [a.url for a in assets]
    by_url = {r["url"]: r["pages"] for r in rows}
    for asset in assets:
        assert by_url[asset.url] == [p.url for p in pages[: 1 + asset.id % 3]]
