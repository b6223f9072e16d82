"""media.downloaders.ytdlp against a real HTTP server on 127.0.0.1 serving media that ffmpeg made for the test."""

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from core.net import guard as netguard
from media.downloaders.ytdlp import Refused, _check_formats, ytdlp_download
from tests.servers import Site, SiteServer, directory_files

UA = "crawlhub-test/1.0"
VIDEO_PAGE = (
    "<html><head><title>A clip</title></head>"
    '<body><video controls><source src="clip.mp4" type="video/mp4"></video></body></html>'
)
HTML_AS_VIDEO_PAGE = '<html><head><title>Fake</title></head><body><video src="fake.mp4"></video></body></html>'
needs_ffmpeg = pytest.mark.skipif(
    shutil.which("ffmpeg") is None, reason="ffmpeg is not installed (scripts/system-deps.sh)"
)


def _ffmpeg(*args: str) -> None:
    lavfi = ["-f", "lavfi", "-i", "testsrc=duration=2:size=160x120:rate=10", "-f", "lavfi", "-i", "sine=duration=2"]
    codecs = ["-c:v", "libx264", "-g", "10", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest"]
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", *lavfi, *codecs, *args], check=True, timeout=60)


@pytest.fixture(scope="session")
def media_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("media-site")
    (root / "page.html").write_text(VIDEO_PAGE)
    (root / "novideo.html").write_text("<html><head><title>Text</title></head><body><p>No video.</p></body></html>")
    (root / "fakevideo.html").write_text(HTML_AS_VIDEO_PAGE)
    (root / "fake.mp4").write_text("<!DOCTYPE html><html><body>Please log in</body></html>")
    if shutil.which("ffmpeg"):
        _ffmpeg(str(root / "clip.mp4"))
        (root / "hls").mkdir()
        _ffmpeg("-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod", str(root / "hls" / "index.m3u8"))
    return root


@pytest.fixture
def media_server(media_root):
    with SiteServer(Site(directory_files(media_root)), keep_alive=False) as server:
        yield server


@pytest.fixture
def tmp_dir(tmp_path) -> str:
    path = tmp_path / "work"
    path.mkdir()
    return str(path)


def fetch(url: str, tmp_dir: str, *, max_bytes: int = 10_000_000, allow_private: bool = True):
    return ytdlp_download(
        url, tmp_dir=tmp_dir, max_bytes=max_bytes, socket_timeout=5, allow_private=allow_private, user_agent=UA
    )


def sha256_of(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@needs_ffmpeg
def test_it_downloads_a_direct_mp4_byte_for_byte(media_server, media_root, tmp_dir):
    result = fetch(f"{media_server.url}/clip.mp4", tmp_dir)

    assert result.error_code == "", result.error_message
    assert result.sha256 == sha256_of(media_root / "clip.mp4") == sha256_of(result.path)
    assert (result.status_code, result.mime, result.size) == (
        200,
        "video/mp4",
        (media_root / "clip.mp4").stat().st_size,
    )
    assert os.listdir(tmp_dir) == [os.path.basename(result.path)]
    assert result.metadata["extractor"] == "generic"
    assert json.loads(json.dumps(result.metadata)) == result.metadata
    assert media_server.paths() and all(r == "/clip.mp4" for r in media_server.paths())


@needs_ffmpeg
def test_it_finds_the_video_of_an_html5_page(media_server, media_root, tmp_dir):
    result = fetch(f"{media_server.url}/page.html", tmp_dir)

    assert result.error_code == "", result.error_message
    assert result.sha256 == sha256_of(media_root / "clip.mp4")
    assert result.metadata["title"].startswith("A clip")
    assert result.metadata["webpage_url"] == f"{media_server.url}/page.html"


@needs_ffmpeg
def test_it_joins_an_hls_stream_into_one_media_file(media_server, tmp_dir):
    result = fetch(f"{media_server.url}/hls/index.m3u8", tmp_dir)

    assert result.error_code == "", result.error_message
    assert os.listdir(tmp_dir) == [os.path.basename(result.path)]
    assert result.mime == "video/mp4"
    assert Path(result.path).read_bytes()[4:8] == b"ftyp"  # remuxed from MPEG-TS by ffmpeg
    assert result.metadata["duration"] == pytest.approx(2, abs=0.5)
    assert result.metadata["ext"] == "mp4"
    assert "/hls/index1.ts" in media_server.paths()


@needs_ffmpeg
def test_it_cleans_up_with_discard(media_server, tmp_dir):
    result = fetch(f"{media_server.url}/clip.mp4", tmp_dir)
    result.discard()

    assert result.path == ""
    assert os.listdir(tmp_dir) == []


def test_it_reports_a_page_without_video(media_server, tmp_dir):
    result = fetch(f"{media_server.url}/novideo.html", tmp_dir)

    assert result.error_code == "ytdlp_error"
    assert result.error_message.startswith("Unsupported URL: ")
    assert "\n" not in result.error_message
    assert result.path == ""
    assert os.listdir(tmp_dir) == []


def test_it_refuses_html_served_as_video(media_server, tmp_dir):
    result = fetch(f"{media_server.url}/fakevideo.html", tmp_dir)

    assert result.error_code == "unexpected_html"
    assert os.listdir(tmp_dir) == []


@needs_ffmpeg
def test_it_refuses_a_file_larger_than_the_cap(media_server, tmp_dir):
    result = fetch(f"{media_server.url}/clip.mp4", tmp_dir, max_bytes=10_000)

    assert result.error_code == "body_too_large"
    assert os.listdir(tmp_dir) == []


@needs_ffmpeg
def test_it_stops_a_stream_without_content_length_at_the_cap(media_server, tmp_dir):
    result = fetch(f"{media_server.url}/hls/index.m3u8", tmp_dir, max_bytes=20_000)

    assert result.error_code == "body_too_large"
    assert "/hls/index1.ts" not in media_server.paths()  # stopped during the first segment
    assert os.listdir(tmp_dir) == []


def test_it_refuses_private_addresses_before_any_request(media_server, tmp_dir):
    result = fetch(f"{media_server.url}/clip.mp4", tmp_dir, allow_private=False)

    assert result.error_code == "blocked_address"
    assert media_server.paths() == []
    assert os.listdir(tmp_dir) == []


def test_it_refuses_non_http_urls(tmp_dir):
    result = fetch("file:///etc/passwd", tmp_dir)

    assert result.error_code == "invalid_url"
    assert os.listdir(tmp_dir) == []


def test_it_refuses_protocols_that_external_programs_fetch():
    with pytest.raises(Refused, match="protocol 'rtmp'"):
        _check_formats([{"protocol": "rtmp", "url": "rtmp://192.0.2.1/live"}])


@pytest.fixture
def public_host():
    """127.0.0.2 stands for the public internet (an allowed network, as an operator would allow one)."""
    netguard.allow_networks(["127.0.0.2/32"])
    yield "127.0.0.2"
    netguard.allow_networks(settings.CRAWL_ALLOWED_NETWORKS)


@needs_ffmpeg
def test_a_redirect_to_a_private_address_never_reaches_it(media_server, media_root, public_host, tmp_dir):
    secret = f"{media_server.url}/clip.mp4"  # the private server would serve a real video
    files = directory_files(media_root) | {"/video.mp4": (302, {"Location": secret}, b"")}
    with SiteServer(Site(files), host=public_host, keep_alive=False) as public:
        result = fetch(f"http://{public_host}:{public.port}/video.mp4", tmp_dir, allow_private=False)

    assert public.paths() == ["/video.mp4"]
    assert result.error_code == "blocked_address", result.error_message
    assert media_server.paths() == []  # the private server's own log: not one request
    assert os.listdir(tmp_dir) == []


@needs_ffmpeg
def test_a_rebinding_name_never_reaches_the_private_address(media_root, public_host, tmp_dir, monkeypatch):
    """rebind.test answers a public address once, then a loopback one, where a server listens on
    the same port: yt-dlp asks the gate for every connection, and the gate resolves and checks
    each one, so the second answer is refused instead of connected to."""
    victim = SiteServer(Site(directory_files(media_root)), keep_alive=False)
    public = SiteServer(Site(directory_files(media_root)), host=public_host, port=victim.port, keep_alive=False)
    answers = iter([public_host])

    def rebinding(host, port):
        if host == "rebind.test":
            return [next(answers, "127.0.0.1")]
        return netguard_getaddrinfo(host, port)

    netguard_getaddrinfo = netguard.getaddrinfo
    monkeypatch.setattr(netguard, "getaddrinfo", rebinding)
    with victim, public:
        result = fetch(f"http://rebind.test:{victim.port}/page.html", tmp_dir, allow_private=False)

    assert public.paths() == ["/page.html"]
    assert result.error_code == "blocked_address", result.error_message
    assert "127.0.0.1" in result.error_message
    assert victim.paths() == []
    assert os.listdir(tmp_dir) == []
