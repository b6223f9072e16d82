"""core.net.guard, core.net.client and media.downloaders.plain_http against real TCP servers on 127.0.0.1.

Each server is a tests.servers.RawServer writing raw HTTP/1.1 bytes, so a test can send what
no well-behaved server would: lying Content-Length, gzip bombs, silence, a trickle.
"""

import asyncio
import hashlib
import os
import socket
import time
import zlib

import pytest

from core.net.client import FetchLimits, FetchResponse, fetch, is_transient, make_client
from core.net.guard import address_is_public
from media.downloaders.plain_http import Download, download
from tests import servers
from tests.helpers import free_port
from tests.servers import RawServer, answer, head, read_request_head, silent, tls_context, trickle

HEADERS = {"User-Agent": "crawlhub-tests/1.0"}
QUICK = FetchLimits(connect_timeout=2, read_timeout=2, total_timeout=5, max_bytes=1024 * 1024)
MB = 1024 * 1024


def run_fetch(url: str, *, allow_private: bool = True, limits: FetchLimits = QUICK) -> FetchResponse:
    async def go():
        async with make_client(allow_private=allow_private) as client:
            return await fetch(client, url, headers=HEADERS, limits=limits)

    return asyncio.run(go())


def run_download(url: str, tmp_dir, *, allow_private: bool = True, limits: FetchLimits = QUICK) -> Download:
    async def go():
        async with make_client(allow_private=allow_private) as client:
            return await download(client, url, headers=HEADERS, limits=limits, tmp_dir=str(tmp_dir))

    return asyncio.run(go())


def drain_accepts(listener: socket.socket) -> int:
    """Accept whatever connections wait in the backlog of a listener nobody serves; return how many."""
    listener.setblocking(False)
    count = 0
    while True:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    """50 MB of zeros, gzipped to about 50 KB."""
    return servers.gzip_bomb(50 * MB)


# --- netguard -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.1.2.3",
        "10.0.0.1",
        "10.255.255.255",
        "172.16.0.1",
        "172.31.255.254",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "255.255.255.255",
        "224.0.0.251",
        "::1",
        "::",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "fe80::1%eth0",
        "ff02::1",
        "2001:db8::1",
    ],
)
def test_it_refuses_non_public_addresses(address):
    assert address_is_public(address) is False


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2001:4860:4860::8888", "::ffff:8.8.8.8"])
def test_it_accepts_public_addresses(address):
    assert address_is_public(address) is True


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_it_blocks_a_loopback_server_without_ever_connecting(host):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        result = run_fetch(f"http://{host}:{port}/", allow_private=False)
        assert result.error_code == "blocked_address"
        assert result.status_code is None
        assert drain_accepts(listener) == 0
        socket.create_connection(("127.0.0.1", port)).close()  # the count would have seen a connection
        assert drain_accepts(listener) == 1


def test_it_fetches_a_loopback_server_when_private_addresses_are_allowed():
    page = b"<html><title>hello</title></html>"
    with RawServer(answer(body=page, Content_Type="text/html; charset=utf-8", X_Trace="abc")) as server:
        result = run_fetch(server.url("/page?x=1"))
    assert (result.status_code, result.error_code, result.body) == (200, "", page)
    assert result.content_type == "text/html"
    assert result.headers["x-trace"] == "abc"
    assert server.accepted == 1
    assert server.requests[0].startswith(b"GET /page?x=1 HTTP/1.1\r\n")
    assert b"User-Agent: crawlhub-tests/1.0" in server.requests[0]


# --- fetcher: body cap ------------------------------------------------------------------------------


def test_it_refuses_a_body_whose_content_length_exceeds_the_cap():
    with RawServer(answer(body=bytes(2 * MB))) as server:
        result = run_fetch(server.url())
    assert result.error_code == "body_too_large"
    assert result.body == b""


def test_it_caps_a_body_without_content_length():
    def close_delimited(conn, server):
        conn.sendall(head(Content_Type="text/html", Connection="close"))
        for _ in range(3):
            conn.sendall(bytes(MB))

    with RawServer(close_delimited) as server:
        result = run_fetch(server.url())
    assert result.error_code == "body_too_large"


def test_it_caps_a_chunked_body():
    def chunked(conn, server):
        conn.sendall(head(Content_Type="text/html", Transfer_Encoding="chunked"))
        for _ in range(40):
            conn.sendall(b"10000\r\n" + bytes(0x10000) + b"\r\n")
        conn.sendall(b"0\r\n\r\n")

    with RawServer(chunked) as server:
        result = run_fetch(server.url())
    assert result.error_code == "body_too_large"


def test_it_does_not_trust_a_small_content_length_with_a_huge_body():
    def lying(conn, server):
        conn.sendall(head(Content_Type="text/html", Content_Length=100))
        for _ in range(5):
            conn.sendall(bytes(MB))

    with RawServer(lying) as server:
        result = run_fetch(server.url())
    # framing stops at the declared 100 bytes: the rest is never read into the body
    assert (result.status_code, result.error_code, len(result.body)) == (200, "", 100)


def test_it_caps_a_gzip_bomb_by_its_decoded_size_and_quickly(gzip_bomb):
    with RawServer(answer(body=gzip_bomb, Content_Encoding="gzip")) as server:
        started = time.monotonic()
        result = run_fetch(server.url())
    assert len(gzip_bomb) < QUICK.max_bytes  # the declared size alone would have let it through
    assert result.error_code == "body_too_large"
    assert time.monotonic() - started < 5


def test_it_inflates_a_gzip_bomb_in_small_steps_so_memory_stays_bounded(gzip_bomb):
    import tracemalloc

    with RawServer(answer(body=gzip_bomb, Content_Encoding="gzip")) as server:
        tracemalloc.start()
        result = run_fetch(server.url())
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert result.error_code == "body_too_large"
    assert peak < QUICK.max_bytes + 16 * MB, f"peak {peak / MB:.0f} MB for a {QUICK.max_bytes / MB:.0f} MB cap"


def test_it_refuses_a_content_encoding_it_did_not_ask_for():
    with RawServer(answer(body=b"\x8b\x00garbage", Content_Encoding="br")) as server:
        result = run_fetch(server.url())
    assert result.error_code == "decoding_error"


def test_it_decodes_a_gzip_body_under_the_cap():
    page = b"<html>" + b"<p>hello</p>" * 1000 + b"</html>"
    with RawServer(answer(body=zlib.compress(page, wbits=31), Content_Encoding="gzip")) as server:
        result = run_fetch(server.url())
    assert (result.error_code, result.body) == ("", page)


# --- fetcher: timeouts and network errors -----------------------------------------------------------


def test_it_gives_up_on_a_server_that_never_answers_with_read_timeout():
    limits = FetchLimits(connect_timeout=1, read_timeout=1, total_timeout=5, max_bytes=MB)
    with RawServer({"/": silent}) as server:
        result = run_fetch(server.url(), limits=limits)
    assert result.error_code == "read_timeout"
    assert result.elapsed < 4
    assert is_transient(result.error_code)


def test_it_gives_up_on_a_trickling_server_with_total_timeout():
    limits = FetchLimits(connect_timeout=1, read_timeout=1, total_timeout=1.5, max_bytes=MB)
    with RawServer({"/": trickle(every=0.2)}) as server:
        result = run_fetch(server.url(), limits=limits)
    assert result.error_code == "total_timeout"
    assert result.elapsed < 4
    assert is_transient(result.error_code)


def test_it_reports_a_refused_connection_as_connect_error():
    result = run_fetch(f"http://127.0.0.1:{free_port()}/")
    assert result.error_code == "connect_error"
    assert is_transient(result.error_code)


@pytest.mark.parametrize("allow_private", [True, False])
def test_it_reports_an_unresolvable_host_as_dns_error(allow_private):
    result = run_fetch("http://no-such-host.invalid/", allow_private=allow_private)
    assert result.error_code == "dns_error"


def test_it_reports_a_garbage_answer_as_protocol_error():
    with RawServer(lambda conn, server: conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")) as server:
        result = run_fetch(server.url())
    assert result.error_code == "protocol_error"


# --- fetcher: answers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("/next/page.html?x=1", "{origin}/next/page.html?x=1"),
        ("sibling.html", "{origin}/dir/sibling.html"),
        ("https://elsewhere.example/x", "https://elsewhere.example/x"),
    ],
)
def test_it_reports_a_redirect_without_following_it(location, expected):
    with RawServer(answer("301 Moved Permanently", Location=location)) as server:
        result = run_fetch(server.url("/dir/page.html"))
    origin = f"http://127.0.0.1:{server.port}"
    assert (result.status_code, result.error_code) == (301, "")
    assert result.location == expected.format(origin=origin)
    assert result.is_redirect
    assert len(server.requests) == 1


def test_it_returns_an_error_status_with_its_body_and_no_error_code():
    with RawServer(answer("503 Service Unavailable", body=b"busy", Retry_After="30")) as server:
        result = run_fetch(server.url())
    assert (result.status_code, result.body, result.error_code) == (503, b"busy", "")
    assert result.headers["retry-after"] == "30"


@pytest.mark.parametrize(
    ("code", "transient"),
    [
        ("http_429", True),
        ("http_500", True),
        ("http_503", True),
        ("connect_timeout", True),
        ("protocol_error", True),
        ("http_404", False),
        ("http_403", False),
        ("blocked_address", False),
        ("body_too_large", False),
        ("dns_error", True),
        ("robots_disallowed", False),
    ],
)
def test_it_retries_only_transient_errors(code, transient):
    assert is_transient(code) is transient


def test_a_dns_failure_is_retried_not_failed_at_once():
    """A name that does not resolve now (a resolver hiccup, a record being changed) often does later."""
    from crawl.frontier.verdicts import Retry, retry_or_fail

    assert isinstance(retry_or_fail("dns_error", "cannot resolve a.test"), Retry)


# --- media downloader ------------------------------------------------------------------------------


@pytest.fixture
def tmp_dir(tmp_path):
    path = tmp_path / "downloads"
    path.mkdir()
    return path


def test_it_downloads_into_a_temp_file_with_its_sha256(tmp_dir):
    data = os.urandom(300_000)
    with RawServer(answer(body=data, Content_Type="image/jpeg; q=1")) as server:
        result = run_download(server.url("/media/a.jpg"), tmp_dir)
    assert (result.error_code, result.status_code, result.size, result.mime) == ("", 200, len(data), "image/jpeg")
    assert result.sha256 == hashlib.sha256(data).hexdigest()
    assert os.path.dirname(result.path) == str(tmp_dir)
    with open(result.path, "rb") as f:
        assert f.read() == data


def test_it_follows_redirects_when_downloading(tmp_dir):
    data = os.urandom(10_000)

    def moved_then_file(conn, server):
        first = len(server.requests) == 1
        answer("302 Found", Location="/media/real.mp4")(conn, server) if first else answer(body=data)(conn, server)

    with RawServer(moved_then_file) as server:
        result = run_download(server.url("/media/old.mp4"), tmp_dir)
    assert (result.error_code, result.status_code, result.sha256) == ("", 200, hashlib.sha256(data).hexdigest())
    assert server.requests[1].startswith(b"GET /media/real.mp4 ")


def test_it_removes_the_temp_file_when_the_download_exceeds_the_cap(tmp_dir):
    with RawServer(answer(body=os.urandom(300_000))) as server:
        result = run_download(server.url("/media/big.jpg"), tmp_dir, limits=FetchLimits(max_bytes=100_000))
    assert result.error_code == "body_too_large"
    assert result.path == ""
    assert os.listdir(tmp_dir) == []


def test_it_reports_http_404_and_leaves_no_file(tmp_dir):
    with RawServer(answer("404 Not Found", body=b"<h1>missing</h1>")) as server:
        result = run_download(server.url("/media/gone.jpg"), tmp_dir)
    assert (result.error_code, result.status_code, result.path) == ("http_404", 404, "")
    assert os.listdir(tmp_dir) == []


def test_it_gives_up_on_a_redirect_loop_and_leaves_no_file(tmp_dir):
    with RawServer(answer("301 Moved Permanently", Location="/media/loop.jpg")) as server:
        result = run_download(server.url("/media/loop.jpg"), tmp_dir)
    assert result.error_code == "too_many_redirects"
    assert os.listdir(tmp_dir) == []


def test_it_blocks_a_private_download_without_connecting_and_leaves_no_file(tmp_dir):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/media/a.jpg"
        result = run_download(url, tmp_dir, allow_private=False)
        assert drain_accepts(listener) == 0
    assert result.error_code == "blocked_address"
    assert os.listdir(tmp_dir) == []


def test_it_fetches_over_tls_through_the_guarded_transport_and_reuses_the_connection(tmp_path):
    """The guarded transport through TLS, then the pool's keep-alive reuse of the idle TLS
    connection for the second request."""
    import ssl

    import httpx

    from core.net.transport import AiohttpTransport

    server_context = tls_context(tmp_path, expired=False)
    client_context = ssl.create_default_context(cafile=str(tmp_path / "cert-False.pem"))
    with RawServer(_keep_alive, host="127.0.0.2", tls=server_context) as server:
        port = server.port

        async def two_requests():
            transport = AiohttpTransport(allow_private=True, ssl_context=client_context, max_connections=4, keepalive=5)
            async with httpx.AsyncClient(transport=transport) as client:
                first = await client.get(f"https://127.0.0.2:{port}/one")
                second = await client.get(f"https://127.0.0.2:{port}/two")
                return first, second

        first, second = asyncio.run(two_requests())
    assert (first.status_code, first.content, second.content) == (200, b"/one", b"/two")
    assert server.accepted == 1, "the second request came over the first connection"


def _keep_alive(conn, server) -> None:
    """Answers the request read and one more on the same connection, each with its path."""
    request = server.requests[-1]
    for _ in range(2):
        path = request.split(b" ", 2)[1]
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(path), path))
        request = read_request_head(conn)
