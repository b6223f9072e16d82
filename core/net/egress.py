"""One guarded way out to the network for every client that opens its own sockets.

A small forward proxy on 127.0.0.1, served from a thread of each worker process (started on first
use, again after a fork). yt-dlp, gallery-dl, Chromium (through Playwright) and the page fetcher of
a project with its own proxy are given it as their only proxy. It accepts `CONNECT host:port`
(tunnels, for https) and absolute-form requests for http:// URLs, resolves the target once, refuses
the connection if netguard refuses any of its addresses, and connects to the checked address:
directly, or through the project's proxy (its upstream) to that address, so the upstream cannot
resolve the name again. Upstream credentials (`http://user:password@proxy:3128`) are sent as
Proxy-Authorization.

A gate is one listener with one policy (allow_private, upstream). A refusal is answered 403 with the
reason in the status line and in the X-Crawlhub-Egress header, and kept in the gate's `refusals`,
so a caller reports blocked_address instead of a downstream error.
"""

import asyncio
import base64
import ipaddress
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from core.net import guard as netguard
from core.net.guard import BlockedAddress

log = logging.getLogger("crawlhub.egress")

HEAD_LIMIT = 64 * 1024
HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0
IDLE_TIMEOUT = 300.0
EGRESS_HEADER = "X-Crawlhub-Egress"  # on answers the gate makes itself: the error code
HOP_HEADERS = frozenset({"proxy-authorization", "proxy-connection", "connection", "keep-alive"})


class EgressError(Exception):
    """The gate could not reach the target: error_code says why (dns_error, connect_error, ...)."""

    def __init__(self, error_code: str, message: str):
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True)
class Upstream:
    host: str
    port: int
    authorization: str  # the Proxy-Authorization value, or ""


def upstream_of(proxy_url: str) -> Upstream:
    """A project's proxy URL as an upstream; credentials in the URL are kept (ValueError if unusable)."""
    parts = urlsplit(proxy_url.strip())
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"a project proxy must be an http:// URL with a host, not {proxy_url[:100]!r}")
    authorization = ""
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        authorization = "Basic " + base64.b64encode(pair.encode()).decode()
    return Upstream(parts.hostname, parts.port or 80, authorization)


@dataclass(frozen=True)
class ProxyRequest:
    host: str
    port: int
    tunnel: bool  # CONNECT; else an http:// request to forward
    method: str = ""
    path: str = ""
    authority: str = ""
    headers: tuple[str, ...] = ()

    def forward_head(self, upstream: Upstream | None, address: str) -> bytes:
        """The request to send on: origin-form to the target, or absolute-form naming the checked
        address to the upstream (the Host header keeps the name)."""
        target = self.path
        if upstream is not None:
            target = f"http://{_authority(address, self.port)}{self.path}"
        lines = [f"{self.method} {target} HTTP/1.1", *self.headers, "Connection: close"]
        if upstream is not None and upstream.authorization:
            lines.append(f"Proxy-Authorization: {upstream.authorization}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def parse_head(head: bytes) -> ProxyRequest:
    """The request a client sent the gate (ValueError when it is not one the gate serves)."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError("malformed request line")
    method, target, _version = parts
    if method == "CONNECT":
        authority = urlsplit(f"//{target}")
        if not authority.hostname or not authority.port:
            raise ValueError(f"CONNECT needs host:port, not {target[:100]!r}")
        return ProxyRequest(authority.hostname, authority.port, tunnel=True)
    url = urlsplit(_bracketed(target))
    if url.scheme != "http" or not url.hostname:
        raise ValueError("only http:// URLs are forwarded (https goes through CONNECT)")
    port = url.port or 80
    headers = [line for line in lines[1:] if line and line.split(":", 1)[0].strip().lower() not in HOP_HEADERS]
    if not any(line.split(":", 1)[0].strip().lower() == "host" for line in headers):
        headers.insert(0, f"Host: {url.netloc.rsplit('@', 1)[-1]}")
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    return ProxyRequest(url.hostname, port, False, method, path, url.netloc, tuple(headers))


def _bracketed(target: str) -> str:
    """httpcore writes an IPv6 host without brackets in absolute-form (http://::1:8080/): add them."""
    scheme, sep, rest = target.partition("://")
    netloc, slash, path = rest.partition("/")
    if not sep or netloc.count(":") < 2 or netloc.startswith("["):
        return target
    host, _, port = netloc.rpartition(":")
    for candidate, suffix in ((host, f":{port}"), (netloc, "")):
        with suppress(ValueError):
            ipaddress.IPv6Address(candidate)
            return f"{scheme}://[{candidate}]{suffix}{slash}{path}"
    return target


def _authority(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


class Gate:
    """One listener on 127.0.0.1 with one policy; its address is `url` once started."""

    def __init__(self, *, allow_private: bool, upstream: str = "", private_upstream: bool = True):
        self.allow_private = allow_private
        # A project's own proxy may be on a private network; one a spider names (Request(proxy=)) only
        # where the project allows private addresses.
        self.private_upstream = private_upstream
        self.upstream, self.upstream_problem = None, ""
        try:
            self.upstream = upstream_of(upstream) if upstream else None
        except ValueError as exc:  # every request fails with this, instead of going out without it
            self.upstream_problem = str(exc)
        self.refusals: list[str] = []
        self.url = ""
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=HEAD_LIMIT)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._handle(reader, writer)
        except Exception:
            log.debug("egress connection failed", exc_info=True)
        finally:
            writer.close()

    async def _handle(self, reader, writer) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
            request = parse_head(head)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            return
        except ValueError as exc:
            return await _answer(writer, 400, "bad_request", str(exc))
        try:
            target_reader, target_writer = await self._open(request)
        except BlockedAddress as exc:
            self.refusals.append(str(exc))
            log.info("egress refused %s:%s: %s", request.host, request.port, exc)
            return await _answer(writer, 403, "blocked_address", str(exc))
        except EgressError as exc:
            return await _answer(writer, 502, exc.error_code, str(exc))
        if request.tunnel:
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        answer = _pipe if request.tunnel else _relay_answer
        await _splice(reader, writer, target_reader, target_writer, answer)

    async def _open(self, request: ProxyRequest):
        """A connection to the checked target (through the upstream if there is one), the request
        head already sent when it is forwarded."""
        if self.upstream_problem:
            raise EgressError("invalid_proxy", self.upstream_problem)
        address = await _checked_address(request.host, request.port, allow_private=self.allow_private)
        upstream = self.upstream
        if upstream is None:
            reader, writer = await _connect(address, request.port, f"{request.host}:{request.port}")
        else:
            # The project's proxy is trusted with private addresses, never with metadata or our servers.
            reader, writer = await _upstream_connect(upstream, self.private_upstream)
            if request.tunnel:
                await _upstream_tunnel(reader, writer, upstream, _authority(address, request.port))
        if not request.tunnel:
            writer.write(request.forward_head(upstream, address))
        return reader, writer


async def _upstream_connect(upstream: Upstream, private: bool):
    """A connection to the checked proxy; not reaching it is a proxy_error (the proxy's fault, not the
    target's: the page goes again through another proxy of its pool)."""
    try:
        address = await _checked_address(upstream.host, upstream.port, allow_private=private)
        return await _connect(address, upstream.port, f"the proxy {upstream.host}")
    except EgressError as exc:
        raise EgressError("proxy_error", str(exc)) from None


async def _checked_address(host: str, port: int, *, allow_private: bool) -> str:
    try:
        return (await netguard.checked_lookup(host, port, allow_private=allow_private))[0]
    except netguard.Unresolvable as exc:
        raise EgressError("dns_error", str(exc)) from None


async def _connect(address: str, port: int, what: str):
    try:
        return await asyncio.wait_for(asyncio.open_connection(address, port, limit=HEAD_LIMIT), CONNECT_TIMEOUT)
    except TimeoutError:
        raise EgressError("connect_timeout", f"no connection to {what} within {CONNECT_TIMEOUT:g} s") from None
    except OSError as exc:
        raise EgressError("connect_error", f"cannot connect to {what}: {exc.strerror or exc}") from None


async def _upstream_tunnel(reader, writer, upstream: Upstream, authority: str) -> None:
    auth = f"Proxy-Authorization: {upstream.authorization}\r\n" if upstream.authorization else ""
    writer.write(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n{auth}\r\n".encode("latin-1"))
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CONNECT_TIMEOUT)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
        writer.close()
        raise EgressError("proxy_error", f"the proxy {upstream.host} gave no answer to CONNECT") from None
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    if status_line.split(" ")[1:2] != ["200"]:
        writer.close()
        raise EgressError("proxy_error", f"the proxy {upstream.host} answered {status_line[:200]!r}")


async def _answer(writer, status: int, code: str, message: str) -> None:
    body = f"{code}: {message}\n".encode()
    reason = f"{code}: {message}".replace("\r", " ").replace("\n", " ")[:300]
    head = (
        f"HTTP/1.1 {status} {reason}\r\n{EGRESS_HEADER}: {code}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    writer.write(head.encode("utf-8", "replace") + body)
    with suppress(ConnectionError):
        await writer.drain()


async def _splice(client_reader, client_writer, target_reader, target_writer, answer) -> None:
    """Copy both ways (the target's side through `answer`) until either side closes or stays silent
    for IDLE_TIMEOUT; then close both."""
    tasks = [
        asyncio.ensure_future(_pipe(client_reader, target_writer)),
        asyncio.ensure_future(answer(target_reader, client_writer)),
    ]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        target_writer.close()
        client_writer.close()


async def _relay_answer(target_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
    """A forwarded request's answer, its head saying `Connection: close`: the connection to the target
    was checked for one request's host, so the client must not send the next one (maybe for another
    host) on it. The target was asked to close too, but not every server says so in its answer."""
    try:
        head = await asyncio.wait_for(target_reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT)
    except asyncio.LimitOverrunError:  # a head too long for the gate: the client's parser refuses it
        return await _pipe(target_reader, client_writer)
    except asyncio.IncompleteReadError as exc:
        head = exc.partial
    except (TimeoutError, ConnectionError):
        return
    client_writer.write(closing_head(head))
    await _pipe(target_reader, client_writer)


def closing_head(head: bytes) -> bytes:
    """A response head with its hop-by-hop connection headers replaced by `Connection: close`."""
    if not head.endswith(b"\r\n\r\n"):
        return head
    lines = head[:-4].split(b"\r\n")
    kept = [line for line in lines[1:] if line.split(b":", 1)[0].strip().lower().decode("latin-1") not in HOP_HEADERS]
    return b"\r\n".join([lines[0], *kept, b"Connection: close"]) + b"\r\n\r\n"


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with suppress(ConnectionError, TimeoutError):
        while data := await asyncio.wait_for(reader.read(64 * 1024), IDLE_TIMEOUT):
            writer.write(data)
            await writer.drain()


class _EgressThread:
    """The event loop the gates of this process run on, in a daemon thread (a forked child starts
    its own on first use: threads do not survive fork)."""

    def __init__(self):
        self._pid = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._shared: dict[tuple[bool, str, bool], Gate] = {}
        self._lock = threading.Lock()

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="crawlhub-egress", daemon=True).start()
                self._pid, self._loop, self._shared = os.getpid(), loop, {}
            return self._loop

    def call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop()).result(timeout=30)

    def shared(self, allow_private: bool, upstream: str, private_upstream: bool = True) -> Gate:
        loop = self.loop()
        key = (allow_private, upstream, private_upstream)
        with self._lock:
            gate = self._shared.get(key)
        if gate is None:
            gate = Gate(allow_private=allow_private, upstream=upstream, private_upstream=private_upstream)
            asyncio.run_coroutine_threadsafe(gate.start(), loop).result(timeout=30)
            with self._lock:
                gate = self._shared.setdefault(key, gate)
        return gate


_thread = _EgressThread()


def egress_url(*, allow_private: bool, upstream: str = "", private_upstream: bool = True) -> str:
    """The address of this process's long-lived gate for the policy (the page fetcher's proxy)."""
    return _thread.shared(allow_private, upstream, private_upstream).url


@contextmanager
def gate(*, allow_private: bool, upstream: str = "", private_upstream: bool = True) -> Iterator[Gate]:
    """A gate of its own for one call (a yt-dlp run, a render), so its refusals are the call's."""
    own = Gate(allow_private=allow_private, upstream=upstream, private_upstream=private_upstream)
    _thread.call(own.start())
    try:
        yield own
    finally:
        _thread.call(own.stop())
