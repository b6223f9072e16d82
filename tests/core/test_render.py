"""core.net.browser against real HTTP servers on loopback, driving Debian's chromium."""

import contextlib
import os
import shutil
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from django.conf import settings

from core.net import guard as netguard
from core.net.browser import Renderer
from tests.servers import Site, SiteServer, hang

pytestmark = pytest.mark.skipif(
    shutil.which("chromium") is None, reason="chromium is not installed (run scripts/system-deps.sh)"
)

HTML = {"Content-Type": "text/html"}
AGENT = "crawlhub-tests/1.0"


@contextlib.contextmanager
def serve(routes: dict, host: str = "127.0.0.1", port: int = 0) -> Iterator[SiteServer]:
    with SiteServer(Site(routes), host=host, port=port, keep_alive=False) as server:
        yield server


def page(html: str) -> tuple:
    return 200, HTML, html.encode()


@pytest.fixture
def public_host():
    """127.0.0.2 stands for the public internet (an allowed network); 127.0.0.1 stays private."""
    netguard.allow_networks(["127.0.0.2/32"])
    yield "127.0.0.2"
    netguard.allow_networks(settings.CRAWL_ALLOWED_NETWORKS)


@pytest.fixture(scope="module")
def renderer():
    renderer = Renderer(watchdog_grace=2.0)
    yield renderer
    renderer.close()


def render(renderer: Renderer, url: str, **options):
    # The module's first render starts Chromium within its timeout: 5 s was too short on a loaded
    # 2-core machine (the full suite). The tests of the timeout itself give their own.
    defaults = {"allow_private": True, "user_agent": AGENT, "timeout": 20.0, "max_bytes": 1024 * 1024}
    return renderer.render(url, **(defaults | options))


SCRIPTED = page("<body><p>static</p><script>document.body.innerHTML += '<a href=\"/js-' + 'link\">js</a>'</script>")


def test_it_renders_links_that_scripts_insert(renderer):
    with serve({"/": SCRIPTED}) as a:
        rendered = render(renderer, a.url + "/")
        plain = httpx.get(a.url + "/")
    assert rendered.error_code == "", rendered.error_message
    assert rendered.status_code == 200
    assert rendered.content_type == "text/html"
    assert rendered.location == ""
    assert b'<a href="/js-link">js</a>' in rendered.body
    assert '<a href="/js-link">' not in plain.text


def test_it_guards_every_request_the_page_makes(renderer, public_host):
    with serve({"/x": page("<p>B</p>")}) as b:
        page_on_a = f"""<p>A</p>
            <img src="{b.url + "/img.png"}"><img src="/bounce"><iframe src="{b.url + "/x"}"></iframe>
            <script>
              fetch("{b.url + "/api"}").catch(() => {{}});
              try {{ new WebSocket("ws://127.0.0.1:{b.port}/ws"); }} catch (e) {{}}
              new Worker(URL.createObjectURL(new Blob(['fetch("{b.url + "/worker"}").catch(() => 0)'])));
            </script>"""
        routes = {"/": page(page_on_a), "/bounce": (302, {"Location": b.url + "/x"}, b"")}
        with serve(routes, public_host) as a:
            rendered = render(renderer, a.url + "/", allow_private=False)
        assert rendered.error_code == "", rendered.error_message
        assert b"<p>A</p>" in rendered.body
        assert "/bounce" in a.paths()  # the redirect hop was refused, not the first request
        assert (b.connections, b.paths()) == (0, [])


def test_it_refuses_a_redirect_of_the_page_to_a_blocked_address(renderer, public_host):
    with serve({"/x": page("<p>B</p>")}) as b, serve({"/r": (302, {"Location": b.url + "/x"}, b"")}, public_host) as a:
        rendered = render(renderer, a.url + "/r", allow_private=False)
    assert rendered.error_code == "blocked_address", rendered.error_message
    assert "127.0.0.1" in rendered.error_message
    assert (a.paths(), b.connections) == (["/r"], 0)


def test_it_refuses_private_addresses_before_any_request(renderer):
    with serve({"/": SCRIPTED}) as a:
        rendered = render(renderer, a.url + "/", allow_private=False)
    assert rendered.error_code == "blocked_address"
    assert "127.0.0.1" in rendered.error_message
    assert a.connections == 0


def test_it_refuses_schemes_other_than_http(renderer):
    rendered = render(renderer, "file:///etc/passwd")
    assert rendered.error_code == "blocked_scheme"


def test_it_times_out_a_page_that_never_finishes_loading(renderer):
    with serve({"/": page('<p>slow</p><script src="/never.js"></script>'), "/never.js": hang}) as a:
        started = time.monotonic()
        rendered = render(renderer, a.url + "/", timeout=2.0)
    assert rendered.error_code == "render_timeout", rendered.error_message
    assert time.monotonic() - started < 2.0 + 3


def test_it_kills_a_page_that_keeps_the_browser_busy_and_recovers(renderer):
    busy = page("<p>busy</p><script>onload = () => setTimeout(() => { while (true) {} }, 50)</script>")
    with serve({"/": busy, "/ok": SCRIPTED}) as a:
        started = time.monotonic()
        # 3 s to load: time enough on a busy machine, so the timeout hits the busy page after its load
        rendered = render(renderer, a.url + "/", timeout=3.0, wait_after_load_ms=300)
        took = time.monotonic() - started
        after = render(renderer, a.url + "/ok")
    assert rendered.error_code == "render_timeout", rendered.error_message
    assert "browser killed" in rendered.error_message  # loaded, then page.content() hung
    assert took < 3.0 + 0.3 + 2.0 + 2
    assert after.error_code == "", after.error_message


def test_it_reports_a_refused_connection(renderer):
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    rendered = render(renderer, f"http://127.0.0.1:{port}/")
    assert rendered.error_code == "connect_error", rendered.error_message


def test_it_follows_redirects_and_reports_the_final_url(renderer):
    routes = {"/r": (302, {"Location": "/final"}, b""), "/final": page("<p>final page</p>")}
    with serve(routes) as a:
        rendered = render(renderer, a.url + "/r")
    assert rendered.error_code == "", rendered.error_message
    assert (rendered.status_code, rendered.location) == (200, a.url + "/final")
    assert b"final page" in rendered.body
    assert a.paths() == ["/r", "/final"]


def test_it_refuses_rendered_html_over_the_cap(renderer):
    with serve({"/": SCRIPTED}) as a:
        rendered = render(renderer, a.url + "/", max_bytes=64)
    assert rendered.error_code == "body_too_large"
    assert rendered.body == b""


def test_it_starts_a_new_browser_after_a_crash(renderer):
    with serve({"/": SCRIPTED}) as a:
        assert render(renderer, a.url + "/").error_code == ""
        os.kill(renderer._browser_pid, 9)
        rendered = render(renderer, a.url + "/")
    assert rendered.error_code == "", rendered.error_message
