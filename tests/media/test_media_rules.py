"""core.mediarules and media.sniff: pure decisions, no database."""

import time

import pytest

from core.mediarules import MediaRules
from media.sniff import sniff_mime
from tests.core.test_patterns import BOUND, HOSTILE, SLOW


def rules(**kw) -> MediaRules:
    return MediaRules.build(kinds=kw.pop("kinds", ["image", "video", "audio"]), **kw)


def test_it_downloads_only_the_kinds_the_project_wants():
    only_images = rules(kinds=["image"])
    assert only_images.wants("http://a.test/x.jpg", "image")
    assert not only_images.wants("http://a.test/x.mp4", "video")


def test_it_filters_by_extension_but_never_blocks_yt_dlp_pages_that_way():
    jpg_only = rules(extensions=["jpg", ".JPEG"], page_patterns=[r"/watch/"])
    assert jpg_only.wants("http://a.test/p/x.JPG", "image")
    assert not jpg_only.wants("http://a.test/p/x.png", "image")
    assert jpg_only.wants("http://a.test/watch/42", "video")


@pytest.mark.parametrize(
    ("mime", "allowed"),
    [("image/png", True), ("image/jpeg", True), ("video/mp4", True), ("video/webm", False), ("", True)],
)
def test_it_checks_mime_types_with_wildcards(mime, allowed):
    assert rules(mime_types=["image/*", "video/mp4"]).mime_allowed(mime) is allowed


def test_it_picks_the_downloader_by_url():
    r = rules(page_patterns=[r"/watch/\d+$"], gallery_patterns=[r"/album/"])
    assert r.downloader_for("http://a.test/img/x.jpg") == "http"
    assert r.downloader_for("http://a.test/live/index.m3u8") == "ytdlp"
    assert r.downloader_for("http://a.test/dash/manifest.mpd") == "ytdlp"
    assert r.downloader_for("http://a.test/watch/42") == "ytdlp"
    assert r.downloader_for("http://a.test/album/7") == "gallerydl"
    assert (r.media_page_kind("http://a.test/watch/42"), r.media_page_kind("http://a.test/album/7")) == (
        "video",
        "image",
    )
    assert r.media_page_kind("http://a.test/about") is None


@pytest.mark.parametrize(
    ("head", "mime"),
    [
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "image/jpeg"),
        (b"\x89PNG\r\n\x1a\n\x00", "image/png"),
        (b"GIF89a\x01\x00", "image/gif"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "image/webp"),
        (b"\x00\x00\x00\x18ftypmp42", "video/mp4"),
        (b"\x1a\x45\xdf\xa3\x01", "video/webm"),
        (b"ID3\x04\x00", "audio/mpeg"),
        (b"  \n<!DOCTYPE html><html>", "text/html"),
        (b"<HTML><body>Not found", "text/html"),
        (b"\x00\x01\x02plain bytes", None),
    ],
)
def test_it_sniffs_what_the_bytes_really_are(head, mime):
    assert sniff_mime(head) == mime


def test_a_catastrophic_media_page_pattern_gives_up_in_bounded_time():
    rules = MediaRules.build(kinds=["video"], page_patterns=[SLOW])
    started = time.monotonic()
    assert rules.downloader_for(f"http://a.test/{HOSTILE}") == "http"
    assert time.monotonic() - started < BOUND
