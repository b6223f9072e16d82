"""Servers as politeness keys them (core.canonical.server_of: "host" or "host:port") and the budget
a server shares with others when a project groups them: the servers at one IP address, or under
one registrable domain. Pure: no Django; the addresses come from the caller."""

import ipaddress

from core.hostnames import registrable_domain

GROUP_NONE, GROUP_IP, GROUP_DOMAIN = "none", "ip", "domain"


def server_parts(server: str) -> tuple[str, str]:
    """(host, ":port" or ""): "[::1]:8080" is ("::1", ":8080"), "a.com:81" is ("a.com", ":81"),
    "::1" (an IPv6 host on the default port) is ("::1", "")."""
    if server.startswith("["):
        host, _, rest = server[1:].partition("]")
        return host, rest
    if server.count(":") == 1:
        host, _, port = server.partition(":")
        return host, f":{port}"
    return server, ""


def server_join(host: str, port: str) -> str:
    """The server key of a host and a ":port" suffix (server_parts' inverse)."""
    return f"[{host}]{port}" if port and ":" in host else f"{host}{port}"


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def group_key(server: str, mode: str, address: str | None = None) -> str:
    """The budget `server` books its slots and connections on: its own ("none"), its IP address's
    at the same port ("ip"; `address`: what its host resolves to, None when not known yet), or
    its registrable domain's at the same port ("domain"). A server that cannot be grouped (no
    address known, an IP address or a name without a registrable domain) keeps its own."""
    host, port = server_parts(server)
    if mode == GROUP_IP and address:
        return server_join(address, port)
    if mode == GROUP_DOMAIN and (domain := registrable_domain(host)):
        return server_join(domain, port)
    return server
