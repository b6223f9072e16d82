"""The one address check every outbound connection passes, and the aiohttp resolver that applies it.

`refusal(address, port, allow_private=...)` is the policy: a connection may go to a global unicast
address; with `allow_private`, also to private ranges (loopback, RFC 1918, unique-local); never, unless
CRAWL_ALLOWED_NETWORKS names them, to link-local and cloud metadata addresses; and never to the
crawler's own servers (database, broker, storage, Flower: `refuse_services`).

Two transports apply it at connect time, to the address the socket connects to: AiohttpGuard
below (the page fetcher's httpx client over aiohttp, core.net.transport) and core.net.egress (a loopback
forward proxy for every other client: yt-dlp, gallery-dl, Chromium, and a project's own proxy).
Both look a name up once with `checked_lookup`, which refuses it if any address is refused, and
connect to a checked address, so DNS cannot change the answer between the check and the connect.
"""

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

from aiohttp.abc import AbstractResolver, ResolveResult


class BlockedAddress(Exception):
    """The target resolves to an address the project may not reach."""


class BlockedSocket(BlockedAddress, OSError):
    """BlockedAddress raised where only an OSError may be (a socket factory inside aiohttp's
    connect): aiohttp carries it out as ClientConnectorError.os_error, core.net.transport unwraps it."""


def _networks(*cidrs: str) -> tuple:
    return tuple(ipaddress.ip_network(c) for c in cidrs)


NAT64 = ipaddress.ip_network("64:ff9b::/96")
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
# Python 3.11's ipaddress calls these global; they are not (IANA special-purpose registries).
NOT_GLOBAL = _networks("192.0.0.0/24", "100.64.0.0/10", "fec0::/10", "64:ff9b:1::/48", "2001::/23")
# Reachable with allow_private only when CRAWL_ALLOWED_NETWORKS names them: link-local (cloud
# metadata lives there) and the metadata services outside it.
LINK_LOCAL_AND_METADATA = _networks(
    "169.254.0.0/16",  # AWS, GCP, Azure, OpenStack metadata (169.254.169.254), link-local
    "fe80::/10",
    "100.100.100.200/32",  # Alibaba Cloud metadata
    "fd00:ec2::254/128",  # AWS metadata over IPv6
    "168.63.129.16/32",  # Azure wire server
)
SERVICE_PORTS = {"postgres": 5432, "postgresql": 5432, "redis": 6379, "rediss": 6379, "amqp": 5672, "amqps": 5671}

_ALLOWED_NETWORKS: tuple = ()
_REFUSED_SERVICES: set[tuple[str, int]] = set()


def allow_networks(cidrs: list[str]) -> None:
    """Networks reachable even though not public (CRAWL_ALLOWED_NETWORKS: an intranet, test hosts)."""
    global _ALLOWED_NETWORKS
    _ALLOWED_NETWORKS = tuple(ipaddress.ip_network(c, strict=False) for c in cidrs)


def refuse_services(endpoints: list[str]) -> None:
    """The crawler's own servers, as URLs or host:port (CRAWL_REFUSED_SERVICES and those derived
    from the database, broker and storage settings), refused even with allow_private. A name is
    resolved now; a loopback server is refused on every loopback address at its port."""
    refused = set()
    for endpoint in endpoints:
        host, port = _host_port(endpoint)
        if not host or not port:
            continue
        try:
            addresses = {info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
        except (socket.gaierror, UnicodeError):
            continue  # not resolvable here (another machine's compose name): nothing to refuse
        for address in addresses:
            ip = _ip(address)
            refused.add((str(ip), port))
            if ip.is_loopback or ip.is_unspecified:
                refused |= {(a, port) for a in ("127.0.0.1", "::1", "0.0.0.0", "::", *_own_addresses())}
    _REFUSED_SERVICES.clear()
    _REFUSED_SERVICES.update(refused)


def _own_addresses() -> set[str]:
    """This machine's addresses by its host name (a server bound to every interface answers there)."""
    try:
        return {str(_ip(a)) for a in getaddrinfo(socket.gethostname(), None)}
    except (OSError, UnicodeError):
        return set()


def _host_port(endpoint: str) -> tuple[str, int | None]:
    parts = urlsplit(endpoint if "//" in endpoint else f"//{endpoint}")
    try:
        port = parts.port
    except ValueError:
        return "", None
    if port is None:
        port = SERVICE_PORTS.get(parts.scheme) or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.hostname or "", port


def _ip(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The address, or the IPv4 address an IPv6 form carries (mapped, 6to4, NAT64, IPv4-compatible)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            return embedded
    return ip


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in NAT64 or (ip in IPV4_COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _within(ip, networks) -> bool:
    return any(ip.version == net.version and ip in net for net in networks)


def address_is_public(address: str) -> bool:
    """True only for a global unicast address; IPv6 forms that carry an IPv4 address are judged by
    the IPv4 address they carry."""
    ip = _ip(address)
    return ip.is_global and not ip.is_multicast and not _within(ip, NOT_GLOBAL)


def refusal(address: str, port: int | None = None, *, allow_private: bool = False) -> str:
    """Why a connection to address:port is refused, as "is ..." ("" when it may go ahead)."""
    ip = _ip(address)
    key = "127.0.0.1" if ip.is_loopback and ip.version == 4 else str(ip)  # all of 127/8 is this host
    if port is not None and (key, port) in _REFUSED_SERVICES:
        return f"is one of crawlhub's own servers at port {port} (database, broker, storage, Flower or the console)"
    if _within(ip, _ALLOWED_NETWORKS):
        return ""
    if ip.is_multicast or ip.is_unspecified or (ip.is_reserved and ip.version == 4):
        return "is not a unicast address"
    if _within(ip, LINK_LOCAL_AND_METADATA):
        return "is a link-local or cloud metadata address (allowed only through CRAWL_ALLOWED_NETWORKS)"
    if address_is_public(address) or allow_private:
        return ""
    return "is a non-public address (a project may allow private networks)"


def check_addresses(host: str, port: int | None, addresses: list[str], *, allow_private: bool) -> None:
    """Raise BlockedAddress unless every address host resolved to may be connected to."""
    for address in addresses:
        reason = refusal(address, port, allow_private=allow_private)
        if reason and host.strip("[]") == address:
            raise BlockedAddress(f"{address} {reason}")
        if reason:
            raise BlockedAddress(f"{host} resolves to {address}, which {reason}")


def getaddrinfo(host: str, port: int | None) -> list[str]:
    """The addresses of host, each once, in the resolver's order (socket.gaierror if none)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


async def lookup(host: str, port: int | None) -> list[str]:
    """getaddrinfo off the event loop (socket.gaierror if the name does not resolve)."""
    try:
        ipaddress.ip_address(host.strip("[]"))
        return [host.strip("[]")]
    except ValueError:
        pass
    return await asyncio.get_running_loop().run_in_executor(None, getaddrinfo, host, port)


class Unresolvable(OSError):
    """The name has no address (its message starts "cannot resolve": the fetcher's dns_error)."""


async def checked_lookup(host: str, port: int | None, *, allow_private: bool) -> list[str]:
    """The addresses of host, each one permitted (BlockedAddress if any is not, Unresolvable if none)."""
    try:
        addresses = await lookup(host, port)
    except (OSError, UnicodeError) as exc:
        raise Unresolvable(unresolvable(host, exc)) from None
    check_addresses(host, port, addresses, allow_private=allow_private)
    return addresses


def unresolvable(host: str, exc: Exception) -> str:
    """The message of a failed lookup; it starts "cannot resolve", which the fetcher reports as dns_error."""
    return f"cannot resolve {host}: {getattr(exc, 'strerror', None) or exc}"


class AiohttpGuard(AbstractResolver):
    """The address check in aiohttp's TCPConnector, as its resolver and its socket factory.

    As the resolver it looks a name up once and refuses it if any address is refused; the connector
    then connects only to those checked addresses. The connector skips the resolver for an IP
    literal, so the socket factory checks again the very address each socket is created for: no
    socket is made for a refused address, whatever path led there.
    """

    def __init__(self, *, allow_private: bool):
        self.allow_private = allow_private

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_UNSPEC) -> list[ResolveResult]:
        addresses = await checked_lookup(
            host, port, allow_private=self.allow_private
        )  # Unresolvable: aiohttp's DNS error
        return [_resolved(host, address, port) for address in addresses]

    async def close(self) -> None:
        pass  # lookups run in the loop's default executor: nothing of ours to release

    def open_socket(self, addr_info: tuple) -> socket.socket:
        """TCPConnector's socket_factory: a socket only for an address the policy permits."""
        family, kind, proto, _, sockaddr = addr_info
        address, port = sockaddr[0], sockaddr[1]
        try:
            check_addresses(address, port, [address], allow_private=self.allow_private)
        except BlockedAddress as exc:
            raise BlockedSocket(str(exc)) from None
        return socket.socket(family, kind, proto)


def _resolved(host: str, address: str, port: int) -> ResolveResult:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    return ResolveResult(hostname=host, host=address, port=port, family=family, proto=0, flags=0)
