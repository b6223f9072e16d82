"""SSRF guard at connect time: resolve once, refuse non-global addresses, connect to the checked IP.

It sits in httpcore's network backend, so every connection httpx opens (first request, each
redirect hop, robots.txt, media) goes through the same check, and DNS cannot change the answer
between the check and the connect.
"""

import asyncio
import ipaddress
import socket

import httpcore


class BlockedAddress(Exception):
    """The target resolves to an address the project may not reach."""


def address_is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


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
            refused = [a for a in addresses if not address_is_public(a)]
            if refused:
                raise BlockedAddress(f"{host} resolves to non-public address {refused[0]}")
        return await super().connect_tcp(addresses[0], port, timeout, local_address, socket_options)
