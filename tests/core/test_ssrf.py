"""The address guard end to end: with private networks refused (the default), no route reaches a
loopback "victim" server. The crawled site itself lives on 127.0.0.2, allowed explicitly through
CRAWL_ALLOWED_NETWORKS (as an operator would allow one intranet subnet); 127.0.0.1 stays refused."""

import pytest

from bench.check import canon_path
from crawl.models import MediaAsset, Page
from crawl.services.projects import project_get_or_create
from tests.conftest import last_json_line, run_manage
from tests.servers import ForwardProxy, Site, SiteServer, Victim

pytestmark = pytest.mark.integration
HTML = {"Content-Type": "text/html; charset=utf-8"}


def site_pointing_at(victim: str) -> Site:
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    site.files["/redirect"] = (302, {"Location": f"{victim}/secret"}, b"")
    site.files["/img-redirect.jpg"] = (302, {"Location": f"{victim}/x.jpg"}, b"")
    media = f'<img src="{victim}/direct.jpg"><img src="/img-redirect.jpg">'
    site.files["/"] = (200, HTML, f'<html><body>{media}<a href="/video.html">v</a></body></html>'.encode())
    site.files["/video.html"] = (200, HTML, f'<html><body><video src="{victim}/v.mp4"></video></body></html>'.encode())
    return site


@pytest.mark.parametrize("proxied", [False, True], ids=["direct", "through-a-project-proxy"])
def test_no_route_reaches_a_loopback_server_while_the_guard_is_on(workers, worker_env, proxied):
    """Through a project proxy too: the proxy (with credentials) carries the site's own requests
    and is never asked for the victim."""
    victim = Victim()
    port = victim.port
    proxy = ForwardProxy(username="crawler", password="s3cret") if proxied else None
    env = worker_env | {"CRAWL_ALLOWED_NETWORKS": "127.0.0.2/32"}
    forms = [
        f"http://127.0.0.1:{port}/",
        f"http://localhost:{port}/",
        f"http://2130706433:{port}/",
        f"http://0x7f000001:{port}/",
        f"http://0177.0.0.1:{port}/",
        f"http://[::ffff:127.0.0.1]:{port}/",
    ]
    try:
        with SiteServer(site_pointing_at(f"http://127.0.0.1:{port}"), host="127.0.0.2") as site:
            project_get_or_create(
                name="ssrf",
                media_any_host=True,
                media_page_patterns=r"/video\.html$",
                proxy=proxy.url(credentials="crawler:s3cret") if proxy else "",
            )
            workers.env = env
            for stage in ("fetch", "extract", "download"):
                workers.start(stage, stage)
            done = run_manage(
                [
                    "crawl",
                    f"{site.url}/",
                    f"{site.url}/redirect",
                    *forms,
                    "--workers",
                    "0",
                    "--json",
                    "--project",
                    "ssrf",
                    "--timeout",
                    "120",
                ],
                env,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            summary = last_json_line(done.stdout)
    finally:
        victim.close()
        if proxy:
            proxy.close()
    assert victim.accepted == 0, "a connection reached the loopback server"
    if proxy:
        assert proxy.requests and all(f"127.0.0.2:{site.port}" in target for _, target, _ in proxy.requests)
        assert all(auth for _, _, auth in proxy.requests)
    pages = {p.url: p for p in Page.objects.filter(project__slug="ssrf")}
    blocked = {u for u, p in pages.items() if p.error_code == "blocked_address"}
    # the numeric forms of 127.0.0.1 are read as browsers read them, so they are one page with it
    assert {canon_path(u) for u in blocked} == {"/", "/secret"} and len(blocked) >= 3, blocked
    assert f"http://127.0.0.1:{port}/" in blocked and f"http://localhost:{port}/" in blocked
    assert pages[f"{site.url}/redirect"].status_code == 302
    assets = {canon_path(a.url): a.error_code for a in MediaAsset.objects.filter(project__slug="ssrf")}
    assert assets == {
        "/direct.jpg": "blocked_address",  # an image on the victim
        "/img-redirect.jpg": "blocked_address",  # an image that redirects there
        "/v.mp4": "blocked_address",  # a <video src> there (HTTP downloader)
        "/video.html": "blocked_address",  # the same video through yt-dlp's page extraction
    }
    assert summary["pages_fetched"] == 3  # the site's own pages: /, /redirect, /video.html
