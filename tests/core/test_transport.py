"""core.net.transport (httpx over aiohttp) against real servers on loopback: the address guard at
connect time, the body cap and the error codes the fetcher reports.

127.0.0.2 stands for the public internet (an allowed network); 127.0.0.1 stays private. Names are
faked by replacing netguard.getaddrinfo, the one lookup the guard makes.
"""

import asyncio
import gc
import os
import socket
import time
import zlib

import httpx
import pytest
from django.conf import settings

from core.canonical import server_of
from core.net import guard as netguard
from core.net.client import SLOT_MISSED, ClientRunner, FetchLimits, FetchRequest, fetch, fetch_many, make_client
from core.net.transport import AiohttpTransport, answer_headers, send_deadline
from tests.core.test_fetcher import MB, QUICK, drain_accepts, run_download, run_fetch
from tests.helpers import free_port
from tests.servers import RawServer, answer, head, html, tls_context


@pytest.fixture
def public_host():
    netguard.allow_networks(["127.0.0.2/32"])
    yield "127.0.0.2"
    netguard.allow_networks(settings.CRAWL_ALLOWED_NETWORKS)


@pytest.fixture
def resolves(monkeypatch):
    """resolves(name, [addresses]): the answer netguard's lookup gives for name from now on."""
    answers = {}
    real = netguard.getaddrinfo

    def fake(host, port):
        return answers[host] if host in answers else real(host, port)

    monkeypatch.setattr(netguard, "getaddrinfo", fake)
    return answers.__setitem__


def test_the_direct_client_runs_on_aiohttp():
    assert isinstance(make_client(allow_private=False)._transport, AiohttpTransport)


@pytest.mark.parametrize(
    "raw",
    [
        [(b"Content-Type", b"text/html"), (b"X-Twice", b"a"), (b"x-twice", b"b")],
        [(b"Set-Cookie", b"a=1; Path=/"), (b"Set-Cookie", b"b=2, c"), (b"Location", b"/caf\xc3\xa9")],  # UTF-8
        [(b"Location", b"/caf\xe9"), (b"Server", b"x")],  # not UTF-8: Latin-1, as httpx reads it
    ],
)
def test_the_direct_read_gives_the_head_httpx_gives(raw):
    """fetch() reads aiohttp's answer without an httpx.Response around it: names, joined repeats,
    decoding and every Set-Cookie are what the httpx response said for the same bytes."""
    fields, cookies = answer_headers(tuple(raw))
    headers = httpx.Headers(raw)
    assert fields == {k.lower(): v for k, v in headers.items()}
    assert cookies == headers.get_list("set-cookie")


def test_the_direct_client_sends_the_request_httpx_would():
    """The same request line and head as through httpx's client (the client's default headers
    under the caller's, Host first, Content-Length for a body)."""

    async def go(url):
        results = []
        async with make_client(allow_private=True) as client:
            for direct in (client.direct, None):
                client.direct = direct
                headers = {"User-Agent": "probe/1", "X-Extra": "1"}
                results.append(await fetch(client, url, headers=headers, limits=QUICK, method="POST", body=b"abc"))
        return results

    with RawServer(answer(body=b"ok")) as server:
        results = asyncio.run(go(server.url("/a b?q=\u00e9")))
        wire = server.requests
    assert [(r.status_code, r.body) for r in results] == [(200, b"ok")] * 2
    assert wire[0] == wire[1]
    assert wire[0].startswith(b"POST /a%20b?q=%C3%A9 HTTP/1.1\r\n") and b"User-Agent: probe/1\r\n" in wire[0]


@pytest.mark.parametrize("order", [("127.0.0.2", "127.0.0.1"), ("127.0.0.1", "127.0.0.2")])
def test_a_name_with_one_private_address_among_allowed_ones_is_refused(public_host, resolves, order):
    with socket.create_server(("127.0.0.1", 0)) as victim:
        port = victim.getsockname()[1]
        with socket.create_server((public_host, port)) as public:
            resolves("mixed.test", list(order))
            result = run_fetch(f"http://mixed.test:{port}/", allow_private=False)
            assert (result.error_code, result.status_code) == ("blocked_address", None)
            assert "mixed.test resolves to 127.0.0.1" in result.error_message
            assert drain_accepts(victim) == drain_accepts(public) == 0


@pytest.mark.parametrize("host", ["127.0.0.1", "2130706433", "127.1", "0x7f.1", "0x7f000001", "localhost"])
def test_every_spelling_of_ipv4_loopback_is_refused_without_connecting(host):
    with socket.create_server(("127.0.0.1", 0)) as victim:
        result = run_fetch(f"http://{host}:{victim.getsockname()[1]}/", allow_private=False)
        assert result.error_code == "blocked_address", result.error_message
        assert drain_accepts(victim) == 0


@pytest.mark.parametrize("host", ["[::1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::]"])
def test_ipv6_spellings_of_loopback_are_refused(host):
    result = run_fetch(f"http://{host}:{free_port()}/", allow_private=False)
    assert result.error_code == "blocked_address", result.error_message


def test_the_socket_factory_refuses_an_address_the_resolver_never_saw():
    """aiohttp skips the resolver for an IP literal: the socket itself is refused."""
    guard = netguard.AiohttpGuard(allow_private=False)
    with pytest.raises(netguard.BlockedAddress, match=r"127\.0\.0\.1 is a non-public address"):
        guard.open_socket((socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 80)))
    with pytest.raises(netguard.BlockedAddress, match="link-local or cloud metadata"):
        guard.open_socket((socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", 80)))
    guard.open_socket((socket.AF_INET, socket.SOCK_STREAM, 6, "", ("8.8.8.8", 80))).close()


def test_a_redirect_to_a_private_address_is_refused_at_the_hop(public_host, tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as victim:
        target = f"http://127.0.0.1:{victim.getsockname()[1]}/secret.jpg"
        with RawServer(answer("302 Found", Location=target), host=public_host) as site:
            result = run_download(site.url("/a.jpg"), tmp_path, allow_private=False)
        assert (result.error_code, result.status_code) == ("blocked_address", 302)
        assert site.accepted == 1
        assert drain_accepts(victim) == 0


def test_a_gzip_bomb_is_capped_by_its_decoded_size():
    bomb = zlib.compress(bytes(20 * MB), level=9, wbits=31)
    with RawServer(answer(body=bomb, Content_Encoding="gzip")) as server:
        result = run_fetch(server.url())
    assert len(bomb) < QUICK.max_bytes
    assert result.error_code == "body_too_large"


def test_the_body_reaches_the_fetcher_undecoded_and_is_inflated_there():
    page = b"<html>" + b"<p>zipped</p>" * 500 + b"</html>"
    with RawServer(answer(body=zlib.compress(page, wbits=31), Content_Encoding="gzip")) as server:
        result = run_fetch(server.url())
    assert (result.error_code, result.body, result.headers["content-encoding"]) == ("", page, "gzip")
    assert b"Accept-Encoding: gzip, deflate\r\n" in server.requests[0]


def test_excess_bytes_in_the_same_read_as_the_head_are_not_the_answer():
    """One write: head, the declared 100 bytes, then garbage that would parse as a next response."""

    def lying(conn, server):
        conn.sendall(head("200 OK", Content_Type="text/html", Content_Length=100) + bytes(MB))

    for _ in range(5):
        with RawServer(lying) as server:
            result = run_fetch(server.url())
        assert (result.status_code, result.error_code, result.body) == (200, "", bytes(100))


def test_a_malformed_answer_is_a_protocol_error_with_a_short_message():
    garbage = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nBad Header Name: x" + b"\x00" * 300_000 + b"\r\n\r\nhello"
    with RawServer(lambda conn, server: conn.sendall(garbage)) as server:
        result = run_fetch(server.url())
    assert result.error_code == "protocol_error"
    assert len(result.error_message) <= 500


def test_a_redirect_is_reported_not_followed_and_no_cookie_is_kept_by_aiohttp():
    """The shared client keeps no cookie (one project's session must never reach another's
    requests: sessions are kept per project, fetch/cookies.py); aiohttp adds none either."""

    def moved_with_cookie(conn, server):
        if len(server.requests) == 1:
            answer("302 Found", Location="/next", Set_Cookie="sid=1; Path=/")(conn, server)
        else:
            answer(body=b"ok")(conn, server)

    async def go(url):
        async with make_client(allow_private=True) as client:
            first = await fetch(client, url, headers={}, limits=QUICK)
            second = await fetch(client, first.location, headers={}, limits=QUICK)
            return first, second, dict(client.cookies)

    with RawServer(moved_with_cookie) as server:
        first, second, cookies = asyncio.run(go(server.url("/start")))
    assert (first.status_code, first.location, second.body) == (302, server.url("/next"), b"ok")
    assert cookies == {}
    assert b"Cookie:" not in server.requests[1], "the next request carries no cookie the last answer set"


def test_keep_alive_carries_many_pages_over_few_connections():
    def keep_alive(conn, server):
        while True:
            conn.sendall(head("200 OK", Content_Type="text/html", Content_Length=2) + b"ok")
            if not conn.recv(65536):
                return

    limits = FetchLimits(connect_timeout=2, read_timeout=2, total_timeout=10, max_bytes=MB)

    async def go(url):
        async with make_client(allow_private=True) as client:
            requests = [FetchRequest(url=f"{url}?n={n}") for n in range(60)]
            return await fetch_many(client, requests, limits=limits, concurrency=4, per_host={server_of(url): 4})

    with RawServer(keep_alive) as server:
        results = asyncio.run(go(server.url()))
    assert {(r.status_code, r.body) for r in results} == {(200, b"ok")}
    assert server.accepted <= 8


def test_a_batch_to_a_host_without_its_own_limit_is_bounded_by_the_batch_alone():
    """A host missing from per_host shares only the batch's limit (it once waited on it twice and hung)."""
    limits = FetchLimits(connect_timeout=2, read_timeout=2, total_timeout=10, max_bytes=MB)

    async def go(url):
        async with asyncio.timeout(20), make_client(allow_private=True) as client:
            requests = [FetchRequest(url=f"{url}?n={n}") for n in range(12)]
            return await fetch_many(client, requests, limits=limits, concurrency=2)

    with RawServer(answer(body=b"ok")) as server:
        results = asyncio.run(go(server.url()))
    assert [(r.status_code, r.body) for r in results] == [(200, b"ok")] * 12


def test_a_server_that_hangs_up_before_answering_is_a_protocol_error():
    with RawServer(lambda conn, server: None) as server:
        result = run_fetch(server.url())
    assert result.error_code == "protocol_error"


def test_a_certificate_it_cannot_verify_is_a_tls_error(tmp_path):
    server = RawServer({"/": lambda conn: conn.sendall(html(b"ok"))}, tls=tls_context(tmp_path, expired=False))
    try:
        result = run_fetch(f"{server.base}/")
    finally:
        server.close()
    assert result.error_code == "tls_error", result.error_message


def test_a_forked_child_leaves_its_parents_connections_working():
    """A Celery prefork child inherits the parent's client: it makes its own, and collecting the
    inherited one must not close the parent's keep-alive connection (nor unregister it from the
    epoll set the two processes share)."""

    def keep_alive(conn, server):
        while True:
            conn.sendall(head("200 OK", Content_Length=2) + b"ok")
            if not conn.recv(65536):
                return

    runner = ClientRunner()
    with RawServer(keep_alive) as server:
        first = runner.run(fetch(runner.client(allow_private=True), server.url(), headers={}, limits=QUICK))
        pid = os.fork()
        if pid == 0:
            child = runner.run(fetch(runner.client(allow_private=True), server.url(), headers={}, limits=QUICK))
            gc.collect()
            os._exit(0 if child.status_code == 200 else 1)
        assert os.waitpid(pid, 0)[1] == 0
        again = runner.run(fetch(runner.client(allow_private=True), server.url(), headers={}, limits=QUICK))
        runner.close()
    assert (first.status_code, again.status_code, again.error_code) == (200, 200, "")
    assert server.accepted == 2  # the parent's connection, kept alive, and the child's own


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_refused_connection_is_a_connect_error_whatever_the_scheme(scheme):
    result = run_fetch(f"{scheme}://127.0.0.1:{free_port()}/")
    assert result.error_code == "connect_error", result.error_message
    assert result.error_message.startswith("cannot connect to 127.0.0.1:")


def test_a_server_whose_backlog_is_full_is_a_connect_timeout():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        waiting = [socket.socket() for _ in range(3)]
        for sock in waiting:
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", port))
        limits = FetchLimits(connect_timeout=1, read_timeout=2, total_timeout=5, max_bytes=MB)
        result = run_fetch(f"http://127.0.0.1:{port}/", limits=limits)
        for sock in waiting:
            sock.close()
    assert (result.error_code, round(result.elapsed)) == ("connect_timeout", 1)


def test_a_request_whose_connection_is_ready_after_its_last_moment_is_not_written(monkeypatch):
    """The event loop is held up (0.3 s here, while the socket is being made) after the request was
    handed to the client on time: it is answered slot_missed, and nothing is sent."""
    limits = FetchLimits(connect_timeout=2, read_timeout=2, total_timeout=10, max_bytes=MB)
    real_open = netguard.AiohttpGuard.open_socket

    def slow_open(self, addr_info):
        time.sleep(0.3)
        return real_open(self, addr_info)

    monkeypatch.setattr(netguard.AiohttpGuard, "open_socket", slow_open)

    async def go(url):
        async with make_client(allow_private=True) as client:
            request = FetchRequest(url=url, start_at=time.time(), latest_start=time.time() + 0.1)
            return (await fetch_many(client, [request], limits=limits, concurrency=1))[0]

    with RawServer(answer(body=b"ok")) as server:
        result = asyncio.run(go(server.url()))
        time.sleep(0.2)  # a request written would be read by now
        assert (server.accepted, b"".join(server.requests)) == (1, b"")  # connected, nothing written
    assert result.error_code == SLOT_MISSED, result.error_message
    assert "past the last moment to send it" in result.error_message


def test_a_send_deadline_binds_one_request_and_the_connection_it_refused_is_used_again():
    limits = FetchLimits(connect_timeout=2, read_timeout=2, total_timeout=10, max_bytes=MB)

    def keep_alive(conn, server):
        while True:
            conn.sendall(head("200 OK", Content_Length=2) + b"ok")
            request = conn.recv(65536)
            if not request:
                return
            server.requests.append(request)

    async def go(url):
        async with make_client(allow_private=True) as client:
            first = await fetch(client, url, headers={}, limits=limits)  # leaves a kept-alive connection
            send_deadline.set(time.time() - 1)
            missed = await fetch(client, url, headers={}, limits=limits)
            return first, missed, await fetch(client, url, headers={}, limits=limits)

    with RawServer(keep_alive) as server:
        first, missed, next_one = asyncio.run(go(server.url()))
        assert (len(server.requests), server.accepted) == (2, 1)
    assert missed.error_code == SLOT_MISSED
    assert (first.status_code, next_one.status_code, next_one.body) == (200, 200, b"ok")
