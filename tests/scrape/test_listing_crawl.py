"""Seeds from sitemaps and feeds, crawled by real workers: a sitemap index with gzipped children,
an RSS feed, and the Sitemap: line of robots.txt."""

import gzip

import pytest

from bench.check import canon_path
from crawl.models import Page, Seed
from crawl.services.projects import project_get_or_create
from tests.conftest import last_json_line, run_manage
from tests.servers import Site, SiteServer

pytestmark = pytest.mark.integration
HTML = {"Content-Type": "text/html; charset=utf-8"}
XML = {"Content-Type": "application/xml"}


def urlset(base: str, paths: list[str]) -> bytes:
    entries = "".join(f"<url><loc>{base}{p}</loc><lastmod>2026-11-01</lastmod></url>" for p in paths)
    return (
        f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'.encode()
    )


def listing_site(base: str) -> Site:
    site = Site()
    site.files["/robots.txt"] = (200, {"Content-Type": "text/plain"}, f"Sitemap: {base}/sitemap_index.xml\n".encode())
    children = "".join(f"<sitemap><loc>{base}/sm{i}.xml.gz</loc></sitemap>" for i in (1, 2))
    index = f'<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{children}</sitemapindex>'
    site.files["/sitemap_index.xml"] = (200, XML, index.encode())
    for i in (1, 2):
        paths = [f"/s{i}/page{j}.html" for j in range(5)]
        site.files[f"/sm{i}.xml.gz"] = (200, {"Content-Type": "application/gzip"}, gzip.compress(urlset(base, paths)))
    items = "".join(f"<item><title>News {j}</title><link>{base}/news/{j}.html</link></item>" for j in range(4))
    rss = f'<?xml version="1.0"?><rss version="2.0"><channel><title>News</title>{items}</channel></rss>'
    site.files["/feed.xml"] = (200, {"Content-Type": "application/rss+xml"}, rss.encode())
    for i in (1, 2):
        for j in range(5):
            site.files[f"/s{i}/page{j}.html"] = (200, HTML, b"<html><body>listed</body></html>")
    for j in range(4):
        site.files[f"/news/{j}.html"] = (200, HTML, b"<html><body>news</body></html>")
    return site


LISTED = {f"/s{i}/page{j}.html" for i in (1, 2) for j in range(5)}
NEWS = {f"/news/{j}.html" for j in range(4)}


@pytest.fixture
def listing_server():
    holder = Site()
    with SiteServer(holder) as server:
        server.site = listing_site(server.url)
        yield server


def start_workers(workers):
    for stage in ("fetch", "extract", "download"):
        workers.start(stage, stage)


def test_a_sitemap_index_with_gzipped_children_and_an_rss_feed_seed_every_listed_url(
    listing_server, workers, worker_env
):
    url = listing_server.url
    start_workers(workers)
    done = run_manage(
        [
            "crawl",
            "--sitemap",
            f"{url}/sitemap_index.xml",
            "--feed",
            f"{url}/feed.xml",
            "--allow-private",
            "--workers",
            "0",
            "--json",
            "--project",
            "listings",
            "--timeout",
            "120",
        ],
        worker_env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert last_json_line(done.stdout)["pages_failed"] == 0
    pages = {canon_path(p.url): p for p in Page.objects.filter(project__slug="listings")}
    assert {p for p, row in pages.items() if row.kind == "page" and row.state == "done"} == LISTED | NEWS
    assert {p for p, row in pages.items() if row.kind == "sitemap"} == {
        "/sitemap_index.xml",
        "/sm1.xml.gz",
        "/sm2.xml.gz",
    }
    assert pages["/feed.xml"].kind == "feed"
    offered = Seed.objects.get(project__slug="listings", url=f"{url}/sitemap_index.xml")
    assert offered.kind == "sitemap"


def test_robots_sitemaps_are_offered_and_followed_when_the_project_says_so(listing_server, workers, worker_env):
    url = listing_server.url
    project_get_or_create(name="follow", allow_private=True, follow_sitemaps=True)
    project_get_or_create(name="offer-only", allow_private=True)
    start_workers(workers)
    for name in ("follow", "offer-only"):
        done = run_manage(
            ["crawl", f"{url}/news/0.html", "--workers", "0", "--project", name, "--timeout", "120"], worker_env
        )
        assert done.returncode == 0, done.stdout + done.stderr
    followed = {
        canon_path(u) for u in Page.objects.filter(project__slug="follow", state="done").values_list("url", flat=True)
    }
    assert followed >= LISTED
    offer_only = set(Page.objects.filter(project__slug="offer-only").values_list("url", flat=True))
    assert offer_only == {f"{url}/news/0.html"}
    seed = Seed.objects.get(project__slug="offer-only", kind="sitemap")
    assert (seed.url, seed.active) == (f"{url}/sitemap_index.xml", False)


def test_a_relative_robots_sitemap_line_is_offered_against_the_robots_txt_url(listing_server, workers, worker_env):
    url = listing_server.url
    robots = b"\xef\xbb\xbfSitemap: /sitemap_index.xml\nSitemap: /caf\xe9.xml\n"  # a BOM, and a line that is not UTF-8
    listing_server.site.files["/robots.txt"] = (200, {"Content-Type": "text/plain"}, robots)
    project_get_or_create(name="relative", allow_private=True)
    start_workers(workers)
    done = run_manage(
        ["crawl", f"{url}/news/0.html", "--workers", "0", "--project", "relative", "--timeout", "120"], worker_env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    offered = Seed.objects.filter(project__slug="relative", kind="sitemap").values_list("url", flat=True)
    assert list(offered) == [f"{url}/sitemap_index.xml"]
