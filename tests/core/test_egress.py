"""The one guarded way out (core.net.egress and core.net.guard) against real servers on loopback.

127.0.0.2 stands for the public internet (an allowed network here, as an operator would allow one
intranet subnet); 127.0.0.1 is private. Each refusal is witnessed by the server it protects: its
own count of accepted connections stays 0.
"""

import asyncio
import base64
import socket

import httpx
import pytest
import redis
from django.conf import settings

from core.net import egress
from core.net import guard as netguard
from core.net.client import FetchLimits, fetch, make_client
from tests.servers import ForwardProxy, RawServer, Site, SiteServer, Victim, answer

QUICK = FetchLimits(connect_timeout=2, read_timeout=2, total_timeout=5, max_bytes=1024 * 1024)


@pytest.fixture(autouse=True)
def public_host():
    netguard.allow_networks(["127.0.0.2/32"])
    yield "127.0.0.2"
    netguard.allow_networks(settings.CRAWL_ALLOWED_NETWORKS)


def fetch_all(urls: list[str], *, allow_private: bool = False, proxy: str = ""):
    async def go():
        async with make_client(allow_private=allow_private, proxy=proxy) as client:
            return [await fetch(client, url, headers={}, limits=QUICK) for url in urls]

    return asyncio.run(go())


def test_with_a_project_proxy_a_private_target_is_refused_and_the_proxy_sees_nothing():
    victim, proxy = Victim(), ForwardProxy(username="crawler", password="s3cret")
    try:
        targets = [
            f"http://127.0.0.1:{victim.port}/secret",
            f"https://127.0.0.1:{victim.port}/secret",
            f"http://localhost:{victim.port}/secret",
            f"http://[::ffff:127.0.0.1]:{victim.port}/secret",
            "http://10.1.2.3:6379/",
            "http://169.254.169.254/latest/meta-data/",
        ]
        results = fetch_all(targets, proxy=proxy.url(credentials="crawler:s3cret"))
    finally:
        victim.close()
        proxy.close()
    assert [r.error_code for r in results] == ["blocked_address"] * len(targets), [r.error_message for r in results]
    assert proxy.accepted == 0 and victim.accepted == 0


def test_a_public_target_goes_through_the_project_proxy_with_its_credentials(public_host):
    proxy = ForwardProxy(username="crawler", password="p@ss:word")
    with RawServer(answer(body=b"through the proxy"), host=public_host) as site:
        [result] = fetch_all([site.url("/page")], proxy=proxy.url(credentials="crawler:p%40ss%3Aword"))
    proxy.close()
    assert (result.status_code, result.body, result.error_code) == (200, b"through the proxy", "")
    [(method, target, auth)] = proxy.requests
    assert (method, target) == ("GET", f"http://{public_host}:{site.port}/page")  # the checked address
    assert base64.b64decode(auth.removeprefix("Basic ")) == b"crawler:p@ss:word"
    assert site.requests[0].startswith(b"GET /page HTTP/1.1\r\n")


def test_wrong_proxy_credentials_are_the_proxys_answer_not_a_silent_direct_connection(public_host):
    proxy = ForwardProxy(username="crawler", password="right")
    with RawServer(answer(body=b"x"), host=public_host) as site:
        [result] = fetch_all([site.url("/")], proxy=proxy.url(credentials="crawler:wrong"))
    proxy.close()
    assert result.status_code == 407
    assert site.accepted == 0


def test_a_tunnel_through_the_gate_and_the_project_proxy_reaches_the_checked_address(public_host):
    proxy = ForwardProxy()
    with (
        RawServer(answer(body=b"tunnelled"), host=public_host) as site,
        egress.gate(allow_private=False, upstream=proxy.url()) as way_out,
    ):
        reply = _raw_tunnel(way_out.url, f"{public_host}:{site.port}", b"GET /t HTTP/1.1\r\nHost: x\r\n\r\n")
        refused = _raw_tunnel(way_out.url, "127.0.0.1:9", b"")
    proxy.close()
    assert reply.startswith(b"HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK")
    assert reply.endswith(b"tunnelled")
    assert refused.startswith(b"HTTP/1.1 403 blocked_address: 127.0.0.1 is a non-public address")
    assert [r[:2] for r in proxy.requests] == [("CONNECT", f"{public_host}:{site.port}")]
    assert len(way_out.refusals) == 1


def _raw_tunnel(gate_url: str, authority: str, then: bytes) -> bytes:
    host, port = gate_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode() + then)
        chunks = []
        while data := sock.recv(65536):
            chunks.append(data)
        return b"".join(chunks)


def test_cloud_metadata_and_link_local_addresses_are_refused_even_with_allow_private():
    results = fetch_all(
        ["http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/", "http://100.100.100.200/"],
        allow_private=True,
    )
    assert [r.error_code for r in results] == ["blocked_address"] * 3
    assert "metadata" in results[0].error_message


def test_the_crawlers_own_servers_are_refused_even_with_allow_private():
    """The broker (Redis here) is one of them: its own connection counter is the witness."""
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    port = broker.connection_pool.connection_kwargs["port"]
    before = broker.info("stats")["total_connections_received"]
    results = fetch_all(
        [f"http://127.0.0.1:{port}/", f"http://localhost:{port}/", f"http://127.0.0.9:{port}/"], allow_private=True
    )
    after = broker.info("stats")["total_connections_received"]
    assert [r.error_code for r in results] == ["blocked_address"] * 3
    assert "crawlhub's own servers" in results[0].error_message
    assert after == before  # Redis counted no connection but ours


def test_the_consoles_own_address_is_refused_even_with_allow_private():
    results = fetch_all(["http://127.0.0.1:8000/admin/", "http://localhost:8000/api/"], allow_private=True)
    assert [r.error_code for r in results] == ["blocked_address"] * 2
    assert "crawlhub's own servers" in results[0].error_message


def test_a_loopback_server_is_fetched_with_allow_private():
    with RawServer(answer(body=b"intranet")) as site:
        [result] = fetch_all([site.url("/")], allow_private=True)
    assert (result.status_code, result.body) == (200, b"intranet")


@pytest.mark.parametrize(
    "address",
    ["192.0.0.8", "192.0.0.170", "fec0::1", "64:ff9b:1::a00:1", "100.64.1.1", "2001:db8::1", "0.0.0.0", "::"],
)
def test_special_ranges_python_calls_global_are_not_public(address):
    assert netguard.address_is_public(address) is False
    assert netguard.refusal(address, 80, allow_private=False)


def test_an_allowed_network_opens_a_metadata_address_only_when_named():
    assert netguard.refusal("169.254.169.254", 80, allow_private=True)
    netguard.allow_networks(["169.254.169.254/32"])
    assert netguard.refusal("169.254.169.254", 80, allow_private=False) == ""


def test_the_gate_answers_a_malformed_request_with_400_and_serves_nothing_else():
    with egress.gate(allow_private=True) as way_out:
        host, port = way_out.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(b"GET https://example.com/ HTTP/1.1\r\n\r\n")
            reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.1 400 bad_request: only http:// URLs are forwarded")


def test_a_proxy_that_is_not_an_http_url_fails_each_request_and_nothing_goes_out_without_it(public_host):
    with RawServer(answer(body=b"x"), host=public_host) as site:
        [result] = fetch_all([site.url("/")], proxy="socks5://127.0.0.1:1080")
    assert result.error_code == "invalid_proxy"
    assert "http:// URL" in result.error_message
    assert site.accepted == 0


def test_a_forwarded_answer_closes_the_connection_so_the_next_host_is_checked_again(public_host):
    """A keep-alive target that does not say it will close: the gate's answer says so, and the
    client's next request, to another host, opens a new connection that is checked on its own."""
    victim = Victim()
    page = (200, {"Content-Type": "text/plain"}, b"public")
    with (
        SiteServer(Site(files={"/a": page, "/b": page}), host=public_host) as site,
        egress.gate(allow_private=False) as gate,
    ):

        async def go():
            async with httpx.AsyncClient(proxy=gate.url, trust_env=False) as client:
                return [
                    await client.get(f"{site.url}/a"),
                    await client.get(f"{site.url}/b"),
                    await client.get(f"http://127.0.0.1:{victim.port}/secret"),
                ]

        first, second, third = asyncio.run(go())
    victim.close()
    assert (first.status_code, first.text, first.headers["connection"]) == (200, "public", "close")
    assert (second.status_code, second.text) == (200, "public")
    assert site.connections == 2  # one connection per forwarded request
    assert third.status_code == 403 and third.headers[egress.EGRESS_HEADER] == "blocked_address"
    assert victim.accepted == 0
