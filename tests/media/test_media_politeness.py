"""Media downloads go through the same host politeness as pages: robots.txt Crawl-delay (read from a
real loopback server's request log), blocked hosts, a busy host's downloads waiting in their rows,
Retry-After, and the project's headers and cookies only on its own sites."""

import itertools
import struct
import zlib
from datetime import timedelta

import pytest
from django.utils import timezone

from core.canonical import server_of
from crawl.models import Host, MediaAsset
from crawl.services.projects import project_get_or_create, seeds_add
from media.services import assets_download
from tests.fetch.test_services import crawl, start
from tests.helpers import wait_until
from tests.servers import Site, SiteServer

HTML = {"Content-Type": "text/html; charset=utf-8"}
ROBOTS_DELAY = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nCrawl-delay: 1\n")
NO_ROBOTS = (404, HTML, b"")


def png(n: int) -> tuple:
    """A small valid PNG, different for each n."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    body = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(bytes([0, n % 256])))
    return (200, {"Content-Type": "image/png"}, body + chunk(b"IEND", b""))


def gallery_site(images: int, robots=ROBOTS_DELAY) -> Site:
    site = Site()
    site.files["/robots.txt"] = robots
    tags = "".join(f'<img src="/img/{i}.png">' for i in range(images))
    site.files["/"] = (200, HTML, f"<html><body>{tags}</body></html>".encode())
    for i in range(images):
        site.files[f"/img/{i}.png"] = png(i)
    return site


def download_all(project, deadline: float = 30) -> None:
    """Wake the download stage (in this process) until the project has no queued asset left."""

    def downloaded() -> bool:
        if not MediaAsset.objects.filter(project=project, state="queued").exists():
            return True
        assets_download(asset_ids=[], worker="w")
        return False

    wait_until(downloaded, timeout=deadline, interval=0.1, what="no queued asset left")


def media_asset(project, url: str) -> MediaAsset:
    return MediaAsset.objects.create(project=project, url=url, url_key=url[-64:].rjust(64, "0"), kind="image")


@pytest.mark.integration
def test_media_downloads_keep_the_hosts_crawl_delay(workers, worker_env):
    """Five images on one page of a host asking for Crawl-delay: 1: every request to the host, the
    page's and the images', at least a second apart, and every image stored."""
    with SiteServer(gallery_site(5)) as server:
        start(workers, worker_env)
        summary = crawl(worker_env, server.url, "polite-media")
        times = sorted(t for t, path in server.log if path != "/robots.txt")
        images = [p for _, p in server.log if p.startswith("/img/")]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    print(f"\ncrawl-delay 1 s, media: {len(times)} requests, smallest gap {min(gaps):.3f} s")
    assert summary["pages_fetched"] == 1
    assert sorted(images) == [f"/img/{i}.png" for i in range(5)], "each image downloaded once"
    assets = MediaAsset.objects.filter(project__slug="polite-media")
    assert sorted(assets.values_list("state", flat=True)) == ["done"] * 5
    assert min(gaps) >= 1.0, f"two requests to the host {min(gaps):.3f} s apart"


def test_media_downloads_stop_for_a_blocked_host(db):
    project = project_get_or_create(name="blocked-media", allow_private=True)
    with SiteServer(gallery_site(2, robots=NO_ROBOTS)) as server:
        rows = [media_asset(project, f"{server.url}/img/{i}.png") for i in range(2)]
        Host.objects.create(host=server_of(server.url), blocked=True, blocked_reason="asked us to stop")
        assets_download(asset_ids=[r.id for r in rows])
        asked = server.paths()
    assert asked == [], "nothing is sent to a blocked host, not even robots.txt"
    assert {(a.state, a.error_code) for a in MediaAsset.objects.filter(project=project)} == {("failed", "host_blocked")}


def test_a_download_whose_host_has_no_free_slot_waits_in_its_row(db, settings):
    """One wake-up takes what the host's Crawl-delay allows now: the other downloads wait in their
    rows for the host's next slots (no process sleeps on them), and are taken when due."""
    settings.CRAWL_DOWNLOAD_BATCH = 10
    project = project_get_or_create(name="busy-media", allow_private=True)
    with SiteServer(gallery_site(3)) as server:
        rows = [media_asset(project, f"{server.url}/img/{i}.png") for i in range(3)]
        assets_download(asset_ids=[], worker="w")  # learns the Crawl-delay with the first download
        states = dict(MediaAsset.objects.filter(project=project).values_list("id", "state"))
        waiting = MediaAsset.objects.filter(project=project, state="queued")
        assert sorted(states.values()) == ["done", "queued", "queued"], "one download now, the others wait"
        assert all(a.next_fetch_at > timezone.now() for a in waiting), "they wait for the host's next slots"
        download_all(project)
        times = sorted(t for t, path in server.log if path.startswith("/img/"))
    assert [r.state for r in MediaAsset.objects.filter(id__in=[r.id for r in rows])] == ["done"] * 3
    assert min(b - a for a, b in itertools.pairwise(times)) >= 1.0


def test_a_429_with_retry_after_on_a_download_holds_its_host_back(db):
    site = gallery_site(1, robots=NO_ROBOTS)
    site.once["/img/0.png"] = (429, {"Retry-After": "120", "Content-Type": "text/plain"}, b"slow down")
    project = project_get_or_create(name="throttled-media", allow_private=True)
    with SiteServer(site) as server:
        row = media_asset(project, f"{server.url}/img/0.png")
        assets_download(asset_ids=[row.id])
    row.refresh_from_db()
    host = Host.objects.get(host=server_of(server.url))
    assert (row.state, row.error_code) == ("queued", "http_429")
    assert host.backoff_until >= timezone.now() + timedelta(seconds=100), "every worker holds the host back"


def test_the_projects_headers_and_cookies_go_only_to_its_own_sites(db):
    """An image on the project's site gets its headers and cookies; the same image moved (a
    redirect) to another host, or an image on another host, gets neither."""
    other_site = gallery_site(1, robots=NO_ROBOTS)
    with SiteServer(other_site, host="127.0.0.2") as other:
        own_site = gallery_site(2, robots=NO_ROBOTS)
        own_site.files["/img/1.png"] = (302, {"Location": f"{other.url}/img/0.png"}, b"")
        with SiteServer(own_site) as own:
            project = project_get_or_create(
                name="secret-media",
                allow_private=True,
                media_any_host=True,
                request_headers={"X-Api-Key": "k1"},
                cookies={"session": "s1"},
            )
            seeds_add(project=project, urls=[f"{own.url}/"])
            rows = [media_asset(project, f"{own.url}/img/0.png"), media_asset(project, f"{own.url}/img/1.png")]
            rows.append(media_asset(project, f"{other.url}/img/0.png?direct"))
            download_all(project)
            own_headers = dict(own.headers)
        other_headers = other.headers
    assert own_headers["/img/0.png"].get("X-Api-Key") == "k1"
    assert "session=s1" in own_headers["/img/0.png"].get("Cookie", "")
    assert own_headers["/img/1.png"].get("X-Api-Key") == "k1"
    assert sorted(p for p, _ in other_headers if p != "/robots.txt") == ["/img/0.png", "/img/0.png?direct"]
    assert all("X-Api-Key" not in h and "Cookie" not in h for _, h in other_headers), other_headers
    assert set(MediaAsset.objects.filter(project=project).values_list("state", flat=True)) == {"done"}


def test_a_429_to_yt_dlp_slows_its_host_down(db):
    """yt-dlp's HTTP errors count like the crawler's own: a 429 without Retry-After is retried later
    and slows the host down (for pages too)."""
    site = gallery_site(0, robots=NO_ROBOTS)
    site.files["/watch"] = (429, {"Content-Type": "text/plain"}, b"slow down")
    project = project_get_or_create(name="throttled-video", allow_private=True)
    with SiteServer(site) as server:
        row = MediaAsset.objects.create(
            project=project, url=f"{server.url}/watch", url_key="7" * 64, kind="video", downloader="ytdlp"
        )
        assets_download(asset_ids=[row.id])
    row.refresh_from_db()
    assert (row.state, row.error_code, row.status_code) == ("queued", "http_429", 429), row.error_message
    assert Host.objects.get(host=server_of(server.url)).throttle_delay > 0


def test_a_download_robots_txt_disallows_is_never_requested(db):
    robots = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /img/private/\n")
    site = gallery_site(1, robots=robots)
    site.files["/img/private/0.png"] = png(7)
    project = project_get_or_create(name="robots-media", allow_private=True)
    with SiteServer(site) as server:
        allowed = media_asset(project, f"{server.url}/img/0.png")
        refused = media_asset(project, f"{server.url}/img/private/0.png")
        download_all(project)
        asked = server.paths()
    allowed.refresh_from_db()
    refused.refresh_from_db()
    assert "/img/private/0.png" not in asked and "/img/0.png" in asked
    assert (allowed.state, refused.state, refused.error_code) == ("done", "failed", "robots_disallowed")
