"""SSRF guard at connect time: resolve once, refuse non-global addresses, connect to the checked IP.

It sits in httpcore's network backend, so every connection httpx opens (first request, each
redirect hop, robots.txt, media) goes through the same check, and DNS cannot change the answer
between the check and the connect.
"""

import asyncio
import ipaddress
import socket

import anyio.abc
import httpcore
from httpcore._backends.anyio import AnyIOStream  # pinned: httpcore==1.0.* (requirements/base.txt)
from httpcore._utils import is_socket_readable


class BlockedAddress(Exception):
    """The target resolves to an address the project may not reach."""


NAT64 = ipaddress.ip_network("64:ff9b::/96")
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def address_is_public(address: str) -> bool:
    """True only for a global unicast address; IPv6 forms that carry an IPv4 address (mapped,
    6to4, NAT64, the old IPv4-compatible form) are judged by the IPv4 address they carry."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            ip = embedded
    return ip.is_global and not ip.is_multicast


_ALLOWED_NETWORKS: tuple = ()


def allow_networks(cidrs: list[str]) -> None:
    """Networks reachable even though not public (CRAWL_ALLOWED_NETWORKS: an intranet, test hosts)."""
    global _ALLOWED_NETWORKS
    _ALLOWED_NETWORKS = tuple(ipaddress.ip_network(c, strict=False) for c in cidrs)


def address_permitted(address: str) -> bool:
    """Public, or inside a network the operator explicitly allowed."""
    if address_is_public(address):
        return True
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    return any(ip.version == net.version and ip in net for net in _ALLOWED_NETWORKS)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in NAT64 or (ip in IPV4_COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


async def resolve(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise httpcore.ConnectError(f"cannot resolve {host}: {exc.strerror}") from None
    return list(dict.fromkeys(info[4][0] for info in infos))


class GuardedBackend(httpcore.AnyIOBackend):
    """An httpcore backend that connects only to checked addresses."""

    def __init__(self, *, allow_private: bool):
        super().__init__()
        self.allow_private = allow_private

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        addresses = await resolve(host, port)
        if not self.allow_private:
            refused = [a for a in addresses if not address_permitted(a)]
            if refused:
                raise BlockedAddress(f"{host} resolves to non-public address {refused[0]}")
        stream = await super().connect_tcp(addresses[0], port, timeout, local_address, socket_options)
        return SocketCachedStream(stream._stream)


class SocketCachedStream(AnyIOStream):
    """httpcore's pool asks every idle connection whether its socket is readable (closed by the
    server) each time it assigns a request, and anyio rebuilds a dict of attribute getters for
    every such lookup: 6% of a fetch worker's CPU in the bench's profile. The socket is looked up
    once here; the readability check itself is unchanged."""

    def __init__(self, stream: anyio.abc.ByteStream):
        super().__init__(stream)
        self._raw_socket = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)

    def get_extra_info(self, info: str):
        if info == "is_readable":
            return is_socket_readable(self._raw_socket)
        if info == "socket":
            return self._raw_socket
        return super().get_extra_info(info)

    async def start_tls(self, *args, **kwargs):
        tls = await super().start_tls(*args, **kwargs)
        return SocketCachedStream(tls._stream)
