"""A local site with images (one shared by 50 pages), a direct mp4, an HTML5 <video> page and an
HLS stream, all made here (the videos by ffmpeg), served by tests.servers.SiteServer."""

import hashlib
import random
import subprocess
from pathlib import Path

from tests.servers import Site

HTML = {"Content-Type": "text/html; charset=utf-8"}


def make_videos(folder: Path) -> dict[str, bytes]:
    """clip.mp4 (2 s), direct.mp4 (1 s) and an HLS stream of the clip, from ffmpeg's test sources."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, seconds in (("clip.mp4", 2), ("direct.mp4", 1)):
        _ffmpeg(
            "-f",
            "lavfi",
            "-i",
            f"testsrc=duration={seconds}:size=160x120:rate=10",
            "-c:v",
            "libx264",
            "-pix_fmt",
            "yuv420p",
            str(folder / name),
        )
    hls = folder / "hls"
    hls.mkdir(exist_ok=True)
    _ffmpeg(
        "-i",
        str(folder / "clip.mp4"),
        "-c",
        "copy",
        "-f",
        "hls",
        "-hls_time",
        "1",
        "-hls_playlist_type",
        "vod",
        str(hls / "stream.m3u8"),
    )
    files = {f"/media/{n}": (folder / n).read_bytes() for n in ("clip.mp4", "direct.mp4")}
    files |= {f"/hls/{p.name}": p.read_bytes() for p in hls.iterdir()}
    return files


def _ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", *args], check=True, timeout=60)


def jpeg(rng: random.Random, size: int) -> bytes:
    return b"\xff\xd8\xff\xe0" + rng.randbytes(size)


def build_media_site(videos: dict[str, bytes], pages: int = 50) -> tuple[Site, dict]:
    """The site, and what must be stored: path -> sha256 per HTTP asset, page paths per asset path."""
    rng = random.Random(11)
    site = Site()
    shared = jpeg(rng, 5000)
    site.files["/img/shared.jpg"] = (200, {"Content-Type": "image/jpeg"}, shared)
    links = ["/video.html", "/direct.html", "/hls.html"]
    referrers = {"/img/shared.jpg": set()}
    for i in range(pages):
        own = jpeg(rng, 3000)
        site.files[f"/img/i{i:02d}.jpg"] = (200, {"Content-Type": "image/jpeg"}, own)
        page = f"/g/p{i:02d}.html"
        body = f'<html><body><h1>Gallery {i}</h1><img src="/img/shared.jpg"><img src="/img/i{i:02d}.jpg"></body></html>'
        site.files[page] = (200, HTML, body.encode())
        referrers["/img/shared.jpg"].add(page)
        referrers[f"/img/i{i:02d}.jpg"] = {page}
        links.append(page)
    for path, data in videos.items():
        kind = "application/vnd.apple.mpegurl" if path.endswith(".m3u8") else "video/mp4"
        site.files[path] = (200, {"Content-Type": kind}, data)
    _page(site, "/video.html", '<video controls><source src="/media/clip.mp4" type="video/mp4"></video>')
    _page(site, "/direct.html", '<a href="/media/direct.mp4">download the film</a>')
    _page(site, "/hls.html", '<video controls src="/hls/stream.m3u8"></video>')
    referrers |= {
        "/media/clip.mp4": {"/video.html"},
        "/video.html": {"/video.html"},
        "/media/direct.mp4": {"/direct.html"},
        "/hls/stream.m3u8": {"/hls.html"},
    }
    _page(site, "/", "".join(f'<a href="{href}">{href}</a> ' for href in links))
    expected = {
        p: hashlib.sha256(site.files[p][2]).hexdigest() for p in referrers if p.startswith(("/img/", "/media/"))
    }
    return site, {"sha256": expected, "referrers": referrers}


def _page(site: Site, path: str, inner: str) -> None:
    site.files[path] = (200, HTML, f"<html><body>{inner}</body></html>".encode())
