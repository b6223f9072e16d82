"""What a host name resolves to, for grouping servers under one politeness budget (core.servers):
each name is looked up once in a background thread and kept for ADDRESS_SECONDS, so a claim waits
for DNS at most a moment, once per new name, never once per page. Nothing connects to these
addresses: the connection's own lookup and check (core.net.guard) are untouched."""

import concurrent.futures
import ipaddress
import os
import socket
import threading
import time

ADDRESS_SECONDS = 300.0  # a name's address is looked up again after this long (its old one serves meanwhile)
FAILED_SECONDS = 30.0  # a name that did not resolve is tried again after this long
WAIT_SECONDS = 0.5  # a claim waits at most this long for the names it has not seen yet

_known: dict[str, tuple[float, str | None]] = {}  # name -> (looked up again after, address or None)
_pending: dict[str, concurrent.futures.Future] = {}
_lock = threading.Lock()
_pool: tuple[int, concurrent.futures.ThreadPoolExecutor] | None = None  # (the process it runs in, the pool)


def addresses_of(names: set[str], *, wait: float = WAIT_SECONDS) -> dict[str, str | None]:
    """{name: the address it resolves to, or None while not known}. IP addresses are themselves.
    A name not looked up yet is looked up now, waited for at most `wait` seconds (after that its
    answer serves the next call); a stale answer serves while it is looked up again."""
    now = time.monotonic()
    with _lock:
        for name in names:
            if name not in _pending and _known.get(name, (0.0, None))[0] <= now and not _is_address(name):
                _pending[name] = _executor().submit(_look_up, name)
        waiting = [_pending[name] for name in names if name in _pending and name not in _known]
    if waiting:
        concurrent.futures.wait(waiting, timeout=wait)
    return {name: name if _is_address(name) else _known.get(name, (0.0, None))[1] for name in names}


def first_address(infos: list) -> str | None:
    """The address a name is grouped by among getaddrinfo's answers: the lowest IPv4 one, else the
    lowest IPv6 one ("localhost" is 127.0.0.1 whether or not ::1 comes first)."""
    addresses = {ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos}
    return str(min(addresses, key=lambda a: (a.version, a))) if addresses else None


def addresses_forget() -> None:
    """Forget every answer (tests)."""
    with _lock:
        _known.clear()


def _look_up(name: str) -> None:
    try:
        address = first_address(socket.getaddrinfo(name, None, type=socket.SOCK_STREAM))
    except (OSError, UnicodeError, ValueError):
        address = None
    with _lock:
        _known[name] = (time.monotonic() + (ADDRESS_SECONDS if address else FAILED_SECONDS), address)
        _pending.pop(name, None)


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    """Made on first use in each process: a forked child (a worker's pool process) has none of its
    parent's threads, so it makes its own."""
    global _pool
    if _pool is None or _pool[0] != os.getpid():
        _pending.clear()
        _pool = (os.getpid(), concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="resolve"))
    return _pool[1]


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True
