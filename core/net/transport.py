"""An httpx transport on aiohttp for the page fetcher's direct connections.

httpx stays the interface (core.net.client, media.downloaders.plain_http and the tests use its client, requests
and errors); the connections and HTTP/1.1 parsing underneath are aiohttp's, which costs a fraction
of httpcore's CPU per page (bench/micro_fetch.py). The address guard is netguard's, applied in the
connector (netguard.AiohttpGuard).

aiohttp is asked to behave as httpcore did: it never decompresses (fetcher.iter_capped inflates in
capped steps), never follows redirects (the crawler follows and checks each hop), ignores the
environment's proxies and keeps no cookies (nor does the httpx client: see fetcher.no_cookies). Its
errors are raised as the httpx errors httpcore raises for the same failure, so
fetcher.classify_error reports the same codes.
"""

import contextlib
import contextvars
import functools
import ipaddress
import os
import ssl
import time
import warnings

import aiohttp
import httpx
import yarl
from aiohttp.client_proto import ResponseHandler  # pinned: aiohttp==3.14.* (requirements/base.txt)

from core.net.guard import AiohttpGuard, BlockedAddress

# A header line (status line, one field) may be 32 KiB, up to 256 of them: aiohttp's defaults (8 KiB,
# 128) refuse some real Content-Security-Policy and Set-Cookie headers; httpcore's h11 allowed
# 100 KiB for the whole head. The bound keeps a hostile head's memory at a few MiB.
MAX_LINE = 32 * 1024
MAX_HEADERS = 256
MAX_MESSAGE = 500  # aiohttp's parser errors quote the offending bytes: a garbage line can be 256 KiB

# Most specific first: the first match decides.
ERRORS = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
    (aiohttp.ServerTimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientSSLError, httpx.ConnectError),  # the cause is an ssl.SSLError: tls_error
    (aiohttp.InvalidURL, httpx.InvalidURL),
    (aiohttp.NonHttpUrlClientError, httpx.UnsupportedProtocol),
    (aiohttp.ClientConnectionResetError, httpx.WriteError),
    (aiohttp.ClientOSError, httpx.ReadError),
    (aiohttp.ClientError, httpx.RemoteProtocolError),  # malformed answer, short body, disconnect
)


# Epoch seconds after which the calling task's next request is not written (0: no limit). Set by
# the politeness-aware callers (fetcher.fetch_many, the media downloads) around a request booked at a
# host slot; read once, just before the request's bytes are written, so a busy event loop that
# reaches a request late never sends it closer to the host's next slot than the delay allows.
send_deadline: contextvars.ContextVar[float] = contextvars.ContextVar("send_deadline", default=0.0)


def deadline_passed(deadline: float) -> bool:
    """Whether a send deadline (epoch seconds; 0: none) has passed."""
    return bool(deadline) and time.time() > deadline


class SlotMissed(Exception):
    """A request reached its connection after its send_deadline; nothing was written."""


@contextlib.contextmanager
def httpx_errors():
    """Raise aiohttp's errors as the httpx error of the same failure (BlockedAddress as itself)."""
    try:
        yield
    except aiohttp.ClientError as exc:
        raise _as_httpx(exc) from exc


def _as_httpx(exc: aiohttp.ClientError) -> Exception:
    cause = getattr(exc, "os_error", None)
    if isinstance(cause, BlockedAddress):
        return BlockedAddress(str(cause))  # refused by the socket factory (an IP literal)
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return httpx.ConnectError(str(cause or exc))  # netguard.unresolvable: "cannot resolve ..."
    if isinstance(exc, aiohttp.ClientConnectorError) and not isinstance(exc, aiohttp.ClientSSLError):
        # aiohttp's own text names the SSL context, which the fetcher would read as a TLS failure
        return httpx.ConnectError(f"cannot connect to {exc.host}:{exc.port}: {cause}"[:MAX_MESSAGE])
    message = (str(exc) or exc.__class__.__name__)[:MAX_MESSAGE]
    return next(httpx_error(message) for aiohttp_error, httpx_error in ERRORS if isinstance(exc, aiohttp_error))


class AiohttpTransport(httpx.AsyncBaseTransport):
    """Direct connections through one aiohttp session, created on the first request.

    aiohttp binds a session to the event loop it was made in, and core.net.client.ClientRunner makes a
    loop per process (Celery forks its workers): the session is made inside the running loop.
    """

    def __init__(self, *, allow_private: bool, ssl_context: ssl.SSLContext, max_connections: int, keepalive: float):
        self._guard = AiohttpGuard(allow_private=allow_private)
        self._ssl_context, self._max_connections, self._keepalive = ssl_context, max_connections, keepalive
        self._session: aiohttp.ClientSession | None = None

    def _open_session(self) -> aiohttp.ClientSession:
        connector = FetchConnector(
            limit=self._max_connections,
            keepalive_timeout=self._keepalive,
            ssl=self._ssl_context,
            resolver=self._guard,
            use_dns_cache=False,  # each new connection looks its name up and checks it, as httpcore's did
            socket_factory=self._guard.open_socket,
        )
        return aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=False,
            trust_env=False,
            timeout=aiohttp.ClientTimeout(total=None),
            max_line_size=MAX_LINE,
            max_field_size=MAX_LINE,
            max_headers=MAX_HEADERS,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        answer = await self.answer(request)
        reason = (answer.reason or "").encode("latin-1", "replace")
        return httpx.Response(
            answer.status,
            headers=answer.raw_headers,
            stream=AiohttpStream(answer),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason},
        )

    async def answer(self, request: httpx.Request) -> aiohttp.ClientResponse:
        """aiohttp's response to an httpx request (its head read, its body not yet), aiohttp's errors
        raised as httpx's. core.net.client.fetch reads it directly: the httpx response and stream
        around it cost more CPU per page than aiohttp itself."""
        if self._session is None:
            self._session = self._open_session()
        if _numeric_spelling(request.url.host):
            await self._check_numeric_host(request.url)
        body = await request.aread()
        with httpx_errors():
            return await self._session.request(
                request.method,
                yarl.URL(str(request.url), encoded=True),  # as httpx encoded it, not quoted again
                headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw],
                data=body or None,
                allow_redirects=False,
                timeout=_timeout(request.extensions.get("timeout", {})),
                server_hostname=request.extensions.get("sni_hostname"),
            )

    async def _check_numeric_host(self, url: httpx.URL) -> None:
        """aiohttp refuses an IPv4 address spelled otherwise than as a dotted quad (2130706433,
        127.1) as an invalid URL before any connect; the guard judges the address it means first,
        so a refused one is reported blocked_address, as with httpcore."""
        port = url.port or {"http": 80, "https": 443}.get(url.scheme, 0)
        try:
            await self._guard.resolve(url.host, port)
        except OSError as exc:
            raise httpx.ConnectError(str(exc)) from None

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


def _numeric_spelling(host: str) -> bool:
    """Digits and dots that are not a dotted-quad IPv4 address."""
    if not host.replace(".", "").isdigit():
        return False
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return True
    return False


class HeadFirstHandler(ResponseHandler):
    """aiohttp's connection protocol, fed a response's head apart from what follows it (a read is
    split at its first blank line, wherever it is: a streaming parser takes any split).

    aiohttp's parser hands over the responses it completed only at the end of a read, and raises
    if the read goes on with bytes that are not a response: a server sending more than its
    Content-Length (the excess then parses as a next response) would fail the fetch when the
    excess arrives in the same read as the head, and not otherwise. httpcore kept the declared
    body and dropped the connection. Once the head has been handed over, an error later in the
    read only closes the connection: the body ends at its declared length, as before.
    """

    def data_received(self, data: bytes) -> None:
        end = data.find(b"\r\n\r\n") + 4
        if 4 <= end < len(data):
            super().data_received(data[:end])
            if self.exception() is not None:
                return  # a malformed head: the connection is closed already
            data = data[end:]
        super().data_received(data)


class FetchConnector(aiohttp.TCPConnector):
    """A TCPConnector whose connections use HeadFirstHandler (aiohttp has no argument for it), and
    which a forked child leaves alone.

    A Celery prefork child inherits its parent's objects, and its sockets and event loop's epoll
    set are the parent's too. aiohttp's connector closes its idle connections when collected,
    which in a child would take them out of the parent's epoll set; a child's copy therefore
    counts as closed (no "unclosed" report, no use) and is collected without touching them.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._factory = functools.partial(HeadFirstHandler, loop=self._loop)
        self._pid = os.getpid()

    async def connect(self, req, traces, timeout):
        """A connection for the request, refused (SlotMissed) past the task's send_deadline. aiohttp
        writes a request without a body on the connection it gets here without yielding to the event
        loop, so the check is as close to the write as the client can get. The deadline holds for one
        request: a redirect hop after it is not bound by the first one's slot."""
        conn = await super().connect(req, traces, timeout)
        deadline = send_deadline.get()
        send_deadline.set(0.0)
        if deadline_passed(deadline):
            conn.release()  # nothing was written on it: it stays usable
            raise SlotMissed(f"{time.time() - deadline:.3f} s past the last moment to send it")
        return conn

    @property
    def closed(self) -> bool:
        return super().closed or self._pid != os.getpid()

    def __del__(self, _warnings=warnings) -> None:
        if self._pid == os.getpid():
            super().__del__(_warnings)


def _timeout(timeout: dict) -> aiohttp.ClientTimeout:
    """httpx's timeouts in aiohttp's terms. aiohttp's `connect` spans the wait for a free connection
    and the connect itself (httpx's pool then connect); sock_read bounds each read, as httpx's read."""
    connect, pool = timeout.get("connect"), timeout.get("pool")
    return aiohttp.ClientTimeout(
        total=None,
        connect=None if connect is None or pool is None else connect + pool,
        sock_connect=connect,
        sock_read=timeout.get("read"),
    )


class AiohttpStream(httpx.AsyncByteStream):
    """The body as it arrives: framing removed, content encoding kept (what httpx calls raw)."""

    def __init__(self, answer: aiohttp.ClientResponse):
        self._answer = answer

    async def __aiter__(self):
        async for chunk in raw_chunks(self._answer):
            yield chunk

    async def aclose(self) -> None:
        answer_close(self._answer)


async def raw_chunks(answer: aiohttp.ClientResponse):
    """The body of an answer as it arrives, framing removed, content encoding kept."""
    with httpx_errors():
        async for chunk in answer.content.iter_any():
            yield chunk


def answer_close(answer: aiohttp.ClientResponse) -> None:
    """A connection whose body was read to its end goes back to the pool; any other is closed (a
    capped or abandoned body is never drained)."""
    if answer.content.at_eof():
        answer.release()
    else:
        answer.close()


def answer_headers(raw: tuple[tuple[bytes, bytes], ...]) -> tuple[dict[str, str], list[str]]:
    """An answer's head as httpx gives it: names lower-cased, repeated fields joined with ", ", the
    values decoded as ASCII, else UTF-8, else Latin-1 (one choice for the whole head); and every
    Set-Cookie value apart."""
    encoding = next(e for e in ("ascii", "utf-8", "iso-8859-1") if _decodes(raw, e))
    fields: dict[str, str] = {}
    cookies = []
    for name, value in raw:
        key, text = name.decode(encoding).lower(), value.decode(encoding)
        fields[key] = f"{fields[key]}, {text}" if key in fields else text
        if key == "set-cookie":
            cookies.append(text)
    return fields, cookies


def _decodes(raw, encoding: str) -> bool:
    try:
        for name, value in raw:
            name.decode(encoding)
            value.decode(encoding)
    except UnicodeDecodeError:
        return False
    return True
