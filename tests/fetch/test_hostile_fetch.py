"""The hostile-input table for fetching: every bad input against real servers (on 127.0.0.2, allowed
through CRAWL_ALLOWED_NETWORKS; 127.0.0.1 stays refused), all in one crawl by real workers. Each
row must end with its error code within a bounded time, and the good pages beside them must be
done by the same, still running, workers."""

import pytest

from crawl.models import Page
from crawl.services.projects import project_get_or_create
from tests.conftest import run_manage
from tests.servers import RawServer, Victim, endless_chunked, gzip_bomb, head, html, send, silent, tls_context, trickle

pytestmark = pytest.mark.integration
GOOD = b"<html><head><title>fine</title></head><body>ok</body></html>"
LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;">'
    b'<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>'
    b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>&lol3;</loc></url></urlset>'
)
TOTAL_TIMEOUT = 8  # tests/settings.py: CRAWL_TOTAL_TIMEOUT
HOST = "127.0.0.2"  # allowed through CRAWL_ALLOWED_NETWORKS


def main_routes(victim_port: int) -> dict:
    routes = {f"/ok{i}": send(html(GOOD)) for i in range(3)}
    routes |= {
        "/robots.txt": send(html(b"", "404 Not Found")),
        "/redir-private": send(html(b"", "302 Found", Location=f"http://127.0.0.1:{victim_port}/")),
        "/loop-a": send(html(b"", "301 Moved Permanently", Location="/loop-b")),
        "/loop-b": send(html(b"", "301 Moved Permanently", Location="/loop-a")),
        "/big": send(head(Content_Type="text/html", Content_Length=20 * 1024 * 1024) + b"<p>" * 1000),
        "/endless": endless_chunked,
        "/liar": send(head(Content_Type="text/html", Content_Length=1000, Connection="close") + b"<p>short"),
        "/bomb": send(head(Content_Type="text/html", Content_Encoding="gzip", Content_Length=len(BOMB)) + BOMB),
        "/brbomb": send(head(Content_Type="text/html", Content_Encoding="br", Content_Length=4) + b"\x1b\xff\xff\x0f"),
        "/silent": silent,
        "/trickle": trickle(),
        "/badcharset": send(
            html(b"<html><title>caf\xe9 \xff\xfe</title><body>x</body></html>").replace(
                b"text/html", b"text/html; charset=x-no-such-charset"
            )
        ),
        "/binary": send(html(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(500))),
        "/evil-sitemap.xml": send(head(Content_Type="application/xml", Content_Length=len(LAUGHS)) + LAUGHS),
    }
    for hop in range(1, 9):
        routes[f"/hop/{hop}"] = send(html(b"", "301 Moved Permanently", Location=f"/hop/{hop + 1}"))
    return routes


BOMB = gzip_bomb()


def robots_server(robots) -> RawServer:
    return RawServer(host=HOST, reply={"/robots.txt": robots, "/ok": send(html(GOOD)), "/blocked": send(html(GOOD))})


def test_every_bad_input_ends_with_its_error_code_and_the_workers_keep_going(workers, worker_env, tmp_path):
    victim = Victim()
    huge = b"User-agent: *\nDisallow: /blocked\n" + b"# filler line of a huge robots.txt\n" * 60_000
    servers = {
        "main": RawServer(main_routes(victim.port), host=HOST),
        "robots_huge": robots_server(send(head(Content_Type="text/plain", Content_Length=len(huge)) + huge)),
        "robots_latin1": robots_server(send(html(b"User-agent: *\nDisallow: /caf\xe9\nDisallow: /blocked\n"))),
        "robots_500": robots_server(send(html(b"oops", "500 Internal Server Error"))),
        "robots_timeout": robots_server(silent),
        "tls_self_signed": RawServer({"/": send(html(GOOD))}, host=HOST, tls=tls_context(tmp_path, expired=False)),
        "tls_expired": RawServer({"/": send(html(GOOD))}, host=HOST, tls=tls_context(tmp_path, expired=True)),
    }
    base = {name: server.base for name, server in servers.items()}
    m = base["main"]
    expected = {  # url -> (state, error_code)
        **{f"{m}/ok{i}": ("done", "") for i in range(3)},
        "ftp://127.0.0.2/file.txt": ("failed", "blocked_scheme"),
        "http://169.254.169.254/latest/meta-data/": ("failed", "blocked_address"),
        f"http://localhost:{victim.port}/": ("failed", "blocked_address"),
        f"{m}/redir-private": ("done", ""),
        f"http://127.0.0.1:{victim.port}/": ("failed", "blocked_address"),
        f"{m}/loop-a": ("done", ""),
        f"{m}/loop-b": ("done", ""),
        f"{m}/hop/1": ("done", ""),
        f"{m}/hop/6": ("failed", "too_many_redirects"),
        f"{m}/big": ("failed", "body_too_large"),
        f"{m}/endless": ("failed", "body_too_large"),
        f"{m}/liar": ("failed", "protocol_error"),
        f"{m}/bomb": ("failed", "body_too_large"),
        f"{m}/brbomb": ("failed", "decoding_error"),
        f"{m}/silent": ("failed", "read_timeout"),
        f"{m}/trickle": ("failed", "total_timeout"),
        f"{m}/badcharset": ("done", ""),
        f"{m}/binary": ("failed", "not_html"),
        f"{m}/evil-sitemap.xml": ("failed", "listing_unsafe_xml"),
        f"{base['robots_huge']}/ok": ("done", ""),
        f"{base['robots_huge']}/blocked": ("failed", "robots_disallowed"),
        f"{base['robots_latin1']}/ok": ("done", ""),
        f"{base['robots_latin1']}/blocked": ("failed", "robots_disallowed"),
        f"{base['robots_500']}/ok": ("failed", "robots_unavailable"),
        f"{base['robots_timeout']}/ok": ("failed", "read_timeout"),
        f"{base['tls_self_signed']}/": ("failed", "tls_error"),
        f"{base['tls_expired']}/": ("failed", "tls_error"),
    }
    seeds = [u for u in expected if "/hop/6" not in u and "/loop-b" not in u and f":{victim.port}/" not in u[:40]]
    seeds += [f"http://localhost:{victim.port}/"]
    env = worker_env | {
        "CRAWL_ALLOWED_NETWORKS": "127.0.0.2/32",
        "CRAWL_MAX_BODY_BYTES": str(1024 * 1024),
        "CRAWL_MAX_ATTEMPTS": "1",
        "CRAWL_LEASE_SECONDS": "60",  # a batch here may wait on robots.txt and a page timeout in a row
    }
    project_get_or_create(name="hostile", allowed_domains="127.0.0.2\nlocalhost\n127.0.0.1\n169.254.169.254")
    workers.env = env
    for stage in ("fetch", "extract", "download"):
        workers.start(stage, stage)
    try:
        sitemap = f"{m}/evil-sitemap.xml"
        pages = [u for u in dict.fromkeys(seeds) if u != sitemap]
        done = run_manage(
            ["crawl", *pages, "--sitemap", sitemap, "--workers", "0", "--project", "hostile", "--timeout", "180"],
            env,
            timeout=240,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        alive = {name: worker.alive() for name, worker in workers.procs.items()}
    finally:
        victim.close()
        for server in servers.values():
            server.close()

    rows = {p.url: p for p in Page.objects.filter(project__slug="hostile")}
    outcomes = {url: (rows[url].state, rows[url].error_code) for url in expected if url in rows}
    assert outcomes == expected
    slow = {u: p.fetch_ms for u, p in rows.items() if p.fetch_ms and p.fetch_ms > (TOTAL_TIMEOUT + 2) * 1000}
    assert slow == {}, "every fetch ends within the total timeout"
    assert victim.accepted == 0
    assert alive == {"fetch": True, "extract": True, "download": True}, "no worker died"
