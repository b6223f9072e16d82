"""Hostile downloads against a real loopback server: each ends with a clear error code on its asset,
no temp file left, nothing partial stored; a storage outage is retried and then succeeds."""

from datetime import timedelta

import pytest
from django.db import OperationalError
from django.test import override_settings
from django.utils import timezone

from core.storage import key_for, list_keys
from core.tempfiles import temp_dir
from crawl.models import MediaAsset
from media.services import assets_download
from tests.helpers import free_port
from tests.s3 import s3_storages
from tests.servers import RawServer, head, send

CAP = 50_000
MP4 = b"\x00\x00\x00\x18ftypmp42" + bytes(2000)


def reply(body: bytes, content_type: str = "video/mp4", length: int | None = None, **headers) -> bytes:
    """An HTTP/1.0 answer; without a length the body ends when the connection closes."""
    if length is not None:
        headers["Content_Length"] = length
    return head("200 OK", Content_Type=content_type, **headers).replace(b"HTTP/1.1", b"HTTP/1.0", 1) + body


ERROR_PAGE = b"<!DOCTYPE html><html><body><h1>Video unavailable</h1></body></html>"
NO_VIDEO = b"<html><body><p>Nothing to see here.</p></body></html>"
EVIL_NAME = 'attachment; filename="../../../etc/passwd\x07.mp4"'
ROUTES = {
    "/big-declared": send(reply(bytes(CAP * 3), length=CAP * 3)),
    "/big-undeclared": send(reply(bytes(CAP * 3))),  # no Content-Length: the body ends when the connection closes
    "/short-body": send(reply(MP4, length=len(MP4) * 10)),  # claims more than it sends, then hangs up
    "/evil-name": send(reply(MP4, length=len(MP4), Content_Disposition=EVIL_NAME)),
    "/error-page": send(reply(ERROR_PAGE, length=len(ERROR_PAGE))),
    "/no-video": send(reply(NO_VIDEO, content_type="text/html", length=len(NO_VIDEO))),
    "/good": send(reply(MP4, length=len(MP4))),
}


@pytest.fixture
def hostile_server():
    with RawServer(ROUTES) as server:
        yield server.base


@pytest.fixture
def project(make_project):
    return make_project(name="hostile", allow_private=True, media_max_bytes=CAP)


def asset(project, url: str, downloader="http") -> MediaAsset:
    return MediaAsset.objects.create(
        project=project, url=url, url_key=url[-64:].rjust(64, "0"), kind="video", downloader=downloader
    )


@pytest.mark.parametrize(
    ("path", "downloader", "state", "error_code"),
    [
        ("/big-declared", "http", "failed", "body_too_large"),
        ("/big-undeclared", "http", "failed", "body_too_large"),
        ("/short-body", "http", "queued", "protocol_error"),
        ("/error-page", "http", "failed", "unexpected_html"),
        ("/no-video", "ytdlp", "failed", "ytdlp_error"),
        ("/missing", "http", "failed", "http_404"),
        ("/evil-name", "http", "done", ""),
    ],
)
def test_it_gives_each_hostile_download_a_clear_outcome(project, hostile_server, path, downloader, state, error_code):
    row = asset(project, hostile_server + path, downloader)
    assets_download(asset_ids=[row.id])
    row.refresh_from_db()
    assert (row.state, row.error_code) == (state, error_code), row.error_message
    assert list(temp_dir().iterdir()) == [], "temp files are removed whatever happened"
    if state == "done":
        assert row.storage_key == key_for(row.sha256), "the stored name never comes from the server"
    else:
        assert row.storage_key == ""


def test_it_retries_when_the_storage_server_is_down_and_stores_once_it_is_back(project, hostile_server, bucket):
    client, name = bucket
    row = asset(project, hostile_server + "/good")
    with override_settings(STORAGES=s3_storages(f"http://127.0.0.1:{free_port()}", name)):
        assets_download(asset_ids=[row.id])
    row.refresh_from_db()
    assert (row.state, row.error_code, row.storage_key) == ("queued", "storage_error", "")
    assert list(temp_dir().iterdir()) == []
    MediaAsset.objects.filter(id=row.id).update(next_fetch_at=timezone.now() - timedelta(seconds=1))
    with override_settings(STORAGES=s3_storages(client.meta.endpoint_url, name)):
        assets_download(asset_ids=[row.id])
        keys = list(list_keys())
    row.refresh_from_db()
    assert (row.state, row.attempts) == ("done", 2)
    assert keys == [key_for(row.sha256)]


@pytest.mark.parametrize("breaking", ["media.services.hosts_release", "media.transfers.vet"])
def test_a_download_batch_cut_off_by_a_database_error_leaves_no_temp_file(
    project, hostile_server, monkeypatch, breaking
):
    """The database restarting after the bytes came in (releasing the hosts, reading the rules):
    the batch fails, and its downloaded files go with it (the sweep of stale temp files would
    take a lease's time, 10 minutes at the shipped settings)."""
    row = asset(project, hostile_server + "/good")

    def restarted(*args, **kwargs):
        raise OperationalError("terminating connection due to administrator command")

    monkeypatch.setattr(breaking, restarted)
    with pytest.raises(OperationalError):
        assets_download(asset_ids=[row.id])
    assert list(temp_dir().iterdir()) == []
