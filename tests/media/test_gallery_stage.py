"""The download stage with gallery-dl: one gallery page becomes one stored asset per file."""

from core.storage import key_for, object_exists
from crawl.models import MediaAsset, Page, PageAsset
from crawl.services.projects import project_get_or_create
from media.services import assets_download
from tests.media.test_gallerydl import fake_gallerydl  # noqa: F401 - the fake gallery-dl on PATH


def test_it_stores_each_gallery_file_as_an_asset_linked_to_the_gallery_pages(db, fake_gallerydl):  # noqa: F811
    fake_gallerydl("files")
    project = project_get_or_create(name="gallery", allow_private=True, media_max_bytes=1000)
    page = Page.objects.create(project=project, url="http://127.0.0.1:9/g/1", url_key="1" * 64, host="127.0.0.1:9")
    gallery = MediaAsset.objects.create(
        project=project, url="http://127.0.0.1:9/g/1", url_key="2" * 64, kind="image", downloader="gallerydl"
    )
    PageAsset.objects.create(page=page, asset=gallery)

    assert assets_download(asset_ids=[gallery.id]) == [gallery.id]
    gallery.refresh_from_db()
    assert (gallery.state, gallery.metadata) == ("done", {"items": 2, "skipped": 1})
    items = MediaAsset.objects.filter(project=project).exclude(id=gallery.id).order_by("url")
    assert [(i.url, i.state, i.size) for i in items] == [
        ("http://127.0.0.1:9/g/1#0", "done", 100),
        ("http://127.0.0.1:9/g/1#1", "done", 200),
    ]
    assert all(object_exists(key_for(i.sha256)) for i in items)
    assert set(PageAsset.objects.filter(page=page).values_list("asset_id", flat=True)) == {
        gallery.id,
        *items.values_list("id", flat=True),
    }
