"""The guarded async HTTP client: timeouts, a decoded-size cap, no automatic redirects.

No Django here: the fetch service passes limits in and stores what comes back. One client per
worker process and per private-network policy, reused across batches (keep-alive per host).
"""

import asyncio
import atexit
import concurrent.futures
import contextlib
import dataclasses
import email.utils
import http.cookiejar
import os
import ssl
import threading
import time
import zlib
from dataclasses import dataclass, field
from urllib.parse import urljoin

import httpcore
import httpx

from core.canonical import server_of
from core.net.egress import EGRESS_HEADER, egress_url
from core.net.guard import BlockedAddress
from core.net.transport import (
    AiohttpTransport,
    SlotMissed,
    answer_close,
    answer_headers,
    deadline_passed,
    raw_chunks,
    send_deadline,
)

TRANSIENT_ERRORS = frozenset(
    {"connect_timeout", "read_timeout", "total_timeout", "connect_error", "dns_error", "protocol_error", "proxy_error"}
)


def is_transient(error_code: str) -> bool:
    """Errors worth another attempt later: network trouble, 429 and 5xx answers."""
    return error_code in TRANSIENT_ERRORS or error_code == "http_429" or error_code.startswith("http_5")


@dataclass(frozen=True)
class FetchLimits:
    connect_timeout: float = 10.0
    read_timeout: float = 20.0
    total_timeout: float = 60.0
    max_bytes: int = 10 * 1024 * 1024
    truncate: bool = False  # keep the first max_bytes instead of failing (robots.txt: RFC 9309 2.5)


@dataclass
class FetchResponse:
    url: str
    status_code: int | None = None
    headers: dict = field(default_factory=dict)
    body: bytes = b""
    location: str = ""
    error_code: str = ""
    error_message: str = ""
    elapsed: float = 0.0
    set_cookies: list[str] = field(default_factory=list)  # every Set-Cookie header (headers keeps one)
    browser_cookies: list[dict] = field(default_factory=list)  # a render's: the cookies Chromium ended with

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    @property
    def is_redirect(self) -> bool:
        return self.status_code in (301, 302, 303, 307, 308) and bool(self.location)


class BodyTooLarge(Exception):
    pass


class EgressRefusal(Exception):
    """The egress gate answered instead of the target (a refusal, or the target was unreachable);
    for a tunnel httpx raises ProxyError with the same "code: message" text."""

    def __init__(self, error_code: str, message: str):
        super().__init__(message)
        self.error_code = error_code


def make_client(
    *, allow_private: bool, max_connections: int = 64, proxy: str = "", private_proxy: bool = True
) -> httpx.AsyncClient:
    """An AsyncClient whose every connection passes the SSRF guard (see netguard).

    Direct connections go through aiohttp (core.net.transport, a fraction of httpcore's CPU per page).
    With a project proxy, the client's only proxy is this process's egress gate (core.net.egress),
    reached through httpcore: the gate checks each target as strictly as the direct guard does, then
    goes through the project's proxy to the checked address, with the credentials in its URL.
    `private_proxy`: whether the proxy may be on a private network (a project's own: yes; one a
    spider's request names: only where the project allows private addresses).
    """
    ssl_context = httpx.create_ssl_context()
    if proxy:
        transport = _egress_transport(allow_private, (proxy, private_proxy), ssl_context, max_connections)
    else:
        transport = AiohttpTransport(
            allow_private=allow_private, ssl_context=ssl_context, max_connections=max_connections, keepalive=KEEPALIVE
        )
    client = httpx.AsyncClient(transport=transport, follow_redirects=False, trust_env=False, cookies=no_cookies())
    client.through_egress = bool(proxy)
    client.direct = None if proxy else transport  # fetch() reads aiohttp's answers from it directly
    return client


KEEPALIVE = 5.0  # seconds an idle connection is kept


def no_cookies() -> http.cookiejar.CookieJar:
    """A cookie jar that keeps nothing. One client serves every project of a process: cookies it
    kept would go to another project's requests. A project's own session is kept per project, in
    the database (fetch/cookies.py), and sent as a header."""
    return http.cookiejar.CookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))


def _egress_transport(
    allow_private: bool, proxy: tuple[str, bool], ssl_context, max_connections: int
) -> httpx.AsyncHTTPTransport:
    """httpcore's proxy pool towards the egress gate (`proxy`: its upstream, and whether that may be
    private). httpx 0.28 has no network_backend argument, so the transport's pool is replaced (httpx
    and httpcore are pinned to their minor versions in requirements/base.txt)."""
    upstream, private_upstream = proxy
    gate = httpx.URL(egress_url(allow_private=allow_private, upstream=upstream, private_upstream=private_upstream))
    transport = httpx.AsyncHTTPTransport()
    transport._pool = httpcore.AsyncHTTPProxy(
        proxy_url=httpcore.URL(scheme=b"http", host=gate.raw_host, port=gate.port, target=b"/"),
        network_backend=httpcore.AnyIOBackend(),
        ssl_context=ssl_context,
        max_connections=max_connections,
        max_keepalive_connections=max_connections,
        keepalive_expiry=KEEPALIVE,
    )
    return transport


SLOT_MISSED = "slot_missed"  # not sent: sent now it would break the host's delay (fetch_many)


@dataclass
class FetchRequest:
    """One request of a batch: method, extra headers and body, and the earliest time to send it."""

    url: str
    method: str = "GET"
    headers: dict = field(default_factory=dict)
    body: bytes | None = None
    start_at: float = 0.0  # epoch seconds: a politeness slot
    # Epoch seconds after which it is not sent at all (0: no limit): a request that missed its slot
    # would come closer to the host's next slot, booked by another batch, than the delay allows.
    latest_start: float = 0.0
    timeout: float | None = None  # seconds for the whole answer, instead of the limits' (connect and read too)
    client: httpx.AsyncClient | None = None  # instead of the batch's (a proxy of the request's own)


@dataclass
class RenderRequest:
    """What a rendered page's first request carries besides its URL (method, body, headers with the
    validators), and the cookies Chromium is given for the render (Playwright's cookie dicts);
    `session_cookies` are those of the project's session among them. `actions`: the page actions
    run once it has loaded (core.net.page_actions), `pace` seconds apart."""

    method: str = "GET"
    headers: dict = field(default_factory=dict)
    body: bytes | None = None
    cookies: list[dict] = field(default_factory=list)
    session_cookies: list[dict] = field(default_factory=list)
    actions: list[dict] = field(default_factory=list)
    pace: float = 0.0


async def fetch(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: dict,
    limits: FetchLimits,
    method: str = "GET",
    body: bytes | None = None,
    target: httpx.URL | None = None,
) -> FetchResponse:
    """One request; never raises: failures come back as error_code/error_message. `target`: the
    URL already parsed by the caller (httpx.URL(url)), not parsed again."""
    started = time.monotonic()
    response = FetchResponse(url=url)
    timeout = httpx.Timeout(limits.read_timeout, connect=limits.connect_timeout)
    try:
        async with asyncio.timeout(limits.total_timeout):
            await _stream_into(response, client, (method, target or url, headers, body), timeout, limits)
    except Exception as exc:
        response.error_code, response.error_message = classify_error(exc, limits)
    response.elapsed = time.monotonic() - started
    return response


async def _stream_into(response, client, request, timeout, limits: FetchLimits) -> None:
    method, url, headers, body = request
    headers = {"Accept-Encoding": ACCEPT_ENCODING, **headers}
    direct = getattr(client, "direct", None)
    if direct is not None:
        await _answer_into(response, direct, _request(client, method, url, headers, body, timeout), limits)
        return
    async with client.stream(method, url, headers=headers, content=body, timeout=timeout) as r:
        check_egress_answer(client, r)
        response.status_code = r.status_code
        response.headers = {k.lower(): v for k, v in r.headers.items()}
        response.set_cookies = r.headers.get_list("set-cookie")
        await _body_into(response, r.aiter_raw(), limits)


async def _body_into(response: FetchResponse, raw_chunks, limits: FetchLimits) -> None:
    """After the head (response.headers filled): the redirect's target, then the body from its raw
    chunks, decoded and capped (the first max_bytes kept when `limits.truncate`)."""
    if "location" in response.headers:
        response.location = urljoin(response.url, response.headers["location"].strip())
    max_bytes, declared = limits.max_bytes, response.headers.get("content-length", "")
    body = capped(response.headers.get("content-encoding", ""), raw_chunks, max_bytes)
    if limits.truncate:
        response.body = await _read_truncated(body, max_bytes)
        return
    too_large = declared.isascii() and declared.isdigit() and int(declared) > max_bytes
    if too_large and "content-encoding" not in response.headers:
        raise BodyTooLarge(f"Content-Length {declared} exceeds the {max_bytes}-byte cap")
    response.body = b"".join([chunk async for chunk in body])


def _request(client: httpx.AsyncClient, method: str, url, headers: dict, body, timeout: httpx.Timeout) -> httpx.Request:
    """The request client.build_request makes (the client's default headers under these, Host
    first), without its cookie, query and base-URL merging, which a fetch client never uses (its
    jar keeps nothing: no_cookies)."""
    merged = client.headers.copy()
    merged.update(headers)
    return httpx.Request(method, url, headers=merged, content=body, extensions={"timeout": timeout.as_dict()})


async def _answer_into(response, transport: AiohttpTransport, request: httpx.Request, limits: FetchLimits) -> None:
    """_stream_into on aiohttp's answer itself (a direct connection): the same request on the wire
    and the same response, without httpx's response and stream objects around it."""
    answer = await transport.answer(request)
    try:
        response.status_code = answer.status
        response.headers, response.set_cookies = answer_headers(answer.raw_headers)
        await _body_into(response, raw_chunks(answer), limits)
    finally:
        answer_close(answer)


async def _read_truncated(body, max_bytes: int) -> bytes:
    """The first max_bytes of a capped body."""
    chunks = []
    try:
        async for chunk in body:
            chunks.append(chunk)
    except BodyTooLarge:
        pass  # the first max_bytes are kept; the rest is never read
    return b"".join(chunks)[:max_bytes]


def check_egress_answer(client: httpx.AsyncClient, r: httpx.Response) -> None:
    """Raise EgressRefusal when the egress gate of a proxied client answered instead of the target."""
    if getattr(client, "through_egress", False) and EGRESS_HEADER in r.headers:
        raise EgressRefusal(r.headers[EGRESS_HEADER], r.reason_phrase)


ACCEPT_ENCODING = "gzip, deflate"  # only what iter_capped decodes itself
DECODE_STEP = 64 * 1024


async def iter_capped(r: httpx.Response, max_bytes: int):
    """The decoded body, at most max_bytes, raising BodyTooLarge past it.

    Decoding is done here, 64 KiB of output at a time, instead of by httpx, which inflates a whole
    network read at once: a gzip bomb's 64 KiB read can be 64 MiB of zeros. Memory stays bounded.
    """
    async for chunk in capped(r.headers.get("content-encoding", ""), r.aiter_raw(), max_bytes):
        yield chunk


async def capped(encoding: str, raw_chunks, max_bytes: int):
    """iter_capped on a body's raw chunks and its Content-Encoding."""
    inflater = _inflater(encoding)
    size = 0
    async for raw in raw_chunks:
        for chunk in _inflate(inflater, raw) if inflater else (raw,):
            size += len(chunk)
            if size > max_bytes:
                raise BodyTooLarge(f"body exceeds the {max_bytes}-byte cap")
            yield chunk


def _inflater(encoding: str):
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    raise httpx.DecodingError(f"unsupported Content-Encoding {encoding!r}")


def _inflate(inflater, data: bytes):
    try:
        while data:
            chunk = inflater.decompress(data, DECODE_STEP)
            data = inflater.unconsumed_tail
            if chunk:
                yield chunk
    except zlib.error as exc:
        raise httpx.DecodingError(f"cannot decode the body: {exc}") from None


def classify_error(exc: BaseException, limits: FetchLimits) -> tuple[str, str]:
    """Map an exception to (error_code, message). Codes in TRANSIENT_ERRORS are retried."""
    message = str(exc) or exc.__class__.__name__
    if isinstance(exc, BlockedAddress):
        return "blocked_address", message
    if isinstance(exc, EgressRefusal):
        return exc.error_code, message.split(": ", 1)[-1]
    if isinstance(exc, httpx.ProxyError):
        return _proxy_error(message)
    if isinstance(exc, BodyTooLarge):
        return "body_too_large", message
    if isinstance(exc, SlotMissed):
        return SLOT_MISSED, f"it missed its host's slot ({message})"
    if isinstance(exc, TimeoutError):
        return "total_timeout", f"no complete response within {limits.total_timeout:g} s"
    if isinstance(exc, httpx.ConnectTimeout):
        return "connect_timeout", message
    if isinstance(exc, httpx.TimeoutException):
        return "read_timeout", message
    if isinstance(exc, httpx.ConnectError):
        return _connect_error_code(exc, message), message
    if isinstance(exc, httpx.DecodingError):
        return "decoding_error", message
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return "protocol_error", message
    if isinstance(exc, (httpx.InvalidURL, httpx.UnsupportedProtocol)):
        return "invalid_url", message
    return "fetch_error", f"{exc.__class__.__name__}: {message}"


def _proxy_error(message: str) -> tuple[str, str]:
    """httpcore's ProxyError for a refused CONNECT is the gate's status line: "403 blocked_address: ..."."""
    status, _, rest = message.partition(" ")
    code, _, detail = rest.partition(": ")
    if status.isdigit() and code.replace("_", "").isalnum() and detail:
        return code, detail
    return "proxy_error", message


def _connect_error_code(exc: BaseException, message: str) -> str:
    if message.startswith("cannot resolve"):
        return "dns_error"
    if isinstance(exc.__cause__, ssl.SSLError) or "SSL" in message or "certificate" in message:
        return "tls_error"
    return "connect_error"


class ClientRunner:
    """A per-process event loop running in a thread of its own, and its clients, kept across Celery
    tasks (prefork children fork first: each process starts its own). Any thread may hand it
    coroutines: `run` waits for the result, `submit` returns a future, so a caller can write to the
    database while its requests go out at their times."""

    def __init__(self):
        self._pid = None
        self._loop = None
        self._clients = {}
        self._lock = threading.RLock()
        atexit.register(self.close)

    def _ensure(self) -> None:
        with self._lock:
            if self._pid != os.getpid():
                self._pid, self._loop, self._clients = os.getpid(), asyncio.new_event_loop(), {}
                threading.Thread(target=self._loop.run_forever, name="crawlhub-http", daemon=True).start()

    def client(self, *, allow_private: bool, proxy: str = "", private_proxy: bool = True) -> httpx.AsyncClient:
        self._ensure()
        key = (allow_private, proxy, private_proxy if proxy else True)
        with self._lock:
            if key not in self._clients:
                on_loop = _running_loop() is self._loop  # a coroutine of this runner's asks: make it here
                made = make_client(allow_private=allow_private, proxy=proxy, private_proxy=key[2]) if on_loop else None
                self._clients[key] = made or self.run(_made(*key))
            return self._clients[key]

    def run(self, coro):
        return self.submit(coro).result()

    def submit(self, coro) -> concurrent.futures.Future:
        self._ensure()
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def close(self) -> None:
        """Close this process's clients (at exit: aiohttp reports a session left open as a leak).
        Those a forked child inherited are left alone: their sockets are its parent's too."""
        if self._pid == os.getpid() and self._clients:
            clients, self._clients = list(self._clients.values()), {}
            with contextlib.suppress(Exception):
                self.submit(_close_all(clients)).result(timeout=10)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _made(allow_private: bool, proxy: str, private_proxy: bool) -> httpx.AsyncClient:
    """A client made on the loop that will use it."""
    return make_client(allow_private=allow_private, proxy=proxy, private_proxy=private_proxy)


async def _close_all(clients: list[httpx.AsyncClient]) -> None:
    await asyncio.gather(*(client.aclose() for client in clients))


runner = ClientRunner()


async def fetch_many(
    client, requests: list[FetchRequest], *, limits: FetchLimits, concurrency: int, per_host: dict | None = None
):
    """Send the requests with at most `concurrency` in flight (and per_host[server] to one server,
    keyed as core.canonical.server_of), none before its start_at, none after its latest_start
    (answered `slot_missed`); results in input order. A 429/503 with Retry-After holds back this
    batch's later requests to that server: they come back as `host_backoff` (retried later)."""
    gate = asyncio.Semaphore(max(1, concurrency))
    host_gates = {h: asyncio.Semaphore(max(1, n)) for h, n in (per_host or {}).items()}
    paused: dict[str, float] = {}

    async def one(request: FetchRequest) -> FetchResponse:
        await asyncio.sleep(max(0.0, request.start_at - time.time()))
        target = httpx.URL(request.url)
        host = server_of(request.url)
        async with host_gates.get(host) or contextlib.nullcontext(), gate:
            if deadline_passed(request.latest_start):
                return FetchResponse(url=request.url, error_code=SLOT_MISSED, error_message="it missed its host's slot")
            if paused.get(host, 0) > time.time():
                return FetchResponse(
                    url=request.url, error_code="host_backoff", error_message="the host asked us to wait (Retry-After)"
                )
            send_deadline.set(request.latest_start)  # checked again when the connection is ready to write
            response = await fetch(
                request.client or client,
                request.url,
                headers=request.headers,
                limits=_limits_of(request, limits),
                method=request.method,
                body=request.body,
                target=target,
            )
            wait = retry_after_seconds(response)
            if wait:
                paused[host] = time.time() + wait
            return response

    return await asyncio.gather(*(one(r) for r in requests))


def _limits_of(request: FetchRequest, limits: FetchLimits) -> FetchLimits:
    """The batch's limits, or the request's own timeout for the whole answer (and at most that for
    the connection and each read)."""
    if request.timeout is None:
        return limits
    seconds = request.timeout
    return dataclasses.replace(
        limits,
        total_timeout=seconds,
        connect_timeout=min(limits.connect_timeout, seconds),
        read_timeout=min(limits.read_timeout, seconds),
    )


def retry_after_seconds(response: FetchResponse, cap: float = 3600) -> float | None:
    """Seconds a 429/503 asks us to wait (Retry-After as seconds or an HTTP date), capped."""
    if response.status_code not in (429, 503):
        return None
    return retry_after_value(response.headers.get("retry-after", ""), cap)


def retry_after_value(value: str, cap: float = 3600) -> float | None:
    """Seconds a Retry-After header's value asks for (seconds or an HTTP date), capped."""
    value = value.strip()
    if value.isascii() and value.isdigit():
        return min(cap, float(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return min(cap, max(0.0, when.timestamp() - time.time())) if when.tzinfo else None
