"""Servers as politeness keys them (host, and port when not the scheme's default) and the budgets
grouped servers share. Pure: no database, no network (the one lookup is of "localhost")."""

import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.canonical import server_of
from core.hostnames import registrable_domain
from core.net.addresses import addresses_of, first_address
from core.servers import group_key, server_join, server_parts


@pytest.mark.parametrize(
    ("url", "server"),
    [
        ("http://example.com/a", "example.com"),
        ("http://example.com:80/a", "example.com"),
        ("https://example.com:443/", "example.com"),
        ("https://Example.COM:8443/x?y", "example.com:8443"),
        ("http://127.0.0.1:8001/", "127.0.0.1:8001"),
        ("http://example.com:443/", "example.com:443"),
        ("http://[::1]:8080/", "[::1]:8080"),
        ("http://[::1]/", "::1"),
        ("http://[bad/", ""),
        ("not a url", ""),
    ],
)
def test_it_names_a_server_by_its_host_and_any_port_other_than_the_default(url, server):
    assert server_of(url) == server


@given(
    host=st.sampled_from(["a.example.com", "127.0.0.1", "::1", "localhost"]),
    port=st.sampled_from(["", ":1", ":8080", ":65535"]),
)
def test_a_server_splits_into_the_host_and_port_it_was_made_of(host, port):
    assert server_parts(server_join(host, port)) == (host, port)


@pytest.mark.parametrize(
    ("server", "mode", "address", "budget"),
    [
        ("localhost:8001", "ip", "127.0.0.1", "127.0.0.1:8001"),
        ("127.0.0.1:8001", "ip", "127.0.0.1", "127.0.0.1:8001"),
        ("localhost", "ip", "::1", "::1"),
        ("localhost:81", "ip", "::1", "[::1]:81"),
        ("new.example.com", "ip", None, "new.example.com"),  # not resolved yet: its own budget meanwhile
        ("a.shop.example.co.uk:81", "domain", None, "example.co.uk:81"),
        ("shop.example.com", "domain", None, "example.com"),
        ("127.0.0.1:81", "domain", None, "127.0.0.1:81"),
        ("localhost", "domain", None, "localhost"),
        ("a.example.com:8001", "none", "10.0.0.1", "a.example.com:8001"),
    ],
)
def test_a_grouped_server_books_on_its_address_or_domain_at_its_own_port(server, mode, address, budget):
    assert group_key(server, mode, address) == budget


def test_it_knows_the_registrable_domain_of_names_and_none_of_addresses():
    assert registrable_domain("b.a.example.com") == "example.com"
    assert registrable_domain("user.github.io") == "user.github.io"
    assert [registrable_domain(h) for h in ("com", "localhost", "127.0.0.1", "::1")] == [None] * 4


def test_a_name_is_grouped_by_its_lowest_ipv4_address_whatever_order_dns_gives():
    infos = [(socket.AF_INET6, 0, 0, "", ("::1", 0, 0, 0)), (socket.AF_INET, 0, 0, "", ("127.0.0.2", 0))]
    infos.append((socket.AF_INET, 0, 0, "", ("127.0.0.1", 0)))
    assert first_address(infos) == "127.0.0.1"
    assert first_address(infos[:1]) == "::1"


def test_addresses_are_looked_up_once_and_addresses_are_themselves():
    assert addresses_of({"localhost", "127.0.0.5"}, wait=5.0) == {"localhost": "127.0.0.1", "127.0.0.5": "127.0.0.5"}
    assert addresses_of({"localhost"}, wait=0.0) == {"localhost": "127.0.0.1"}, "kept: no wait the second time"
