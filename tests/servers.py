"""The tests' servers, each on loopback in daemon threads:

- SiteServer: a threaded HTTP/1.1 server answering from a Site (path -> (status, headers, body), or a
  callable that makes the answer from the request), logging every request it gets;
- RawServer: a socket server that reads one request per connection and lets a callable, or a route
  per path, write whatever bytes it likes (the misbehaving servers: silent, trickle, endless, ...);
- Victim: a listener that only counts the connections it accepts, the witness that nothing got there;
- ForwardProxy: a plain forward proxy standing for a project's own proxy.
"""

import base64
import contextlib
import datetime
import gzip
import hashlib
import ipaddress
import mimetypes
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from bench.sitegen import site_at, site_files

NOT_FOUND = (404, {"Content-Type": "text/html"}, b"gone")


@dataclass
class Site:
    """What a SiteServer serves. A value of files is (status, headers, body), or a callable taking
    the Request and returning one (None: answer nothing and close)."""

    files: dict = field(default_factory=dict)  # path (query string ignored) -> answer
    default: tuple = NOT_FOUND  # the answer for any other path
    slow: dict = field(default_factory=dict)  # path -> seconds to wait between 64 KiB chunks
    etags: bool = False  # send ETag/Last-Modified and answer 304 to matching conditional requests
    once: dict = field(default_factory=dict)  # path -> (status, headers, body) answered the first time only


@dataclass
class Request:
    line: str  # the request line: "GET /path HTTP/1.1"
    method: str
    path: str  # as requested, query string included
    headers: dict
    body: bytes
    server: "SiteServer"


def directory_files(root: Path) -> dict:
    """Every file under root as a Site's files, typed by its name."""
    files = {}
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        files["/" + file.relative_to(root).as_posix()] = (200, {"Content-Type": kind}, file.read_bytes())
    return files


def hang(request: Request) -> None:
    """An answer that never comes (until the server closes)."""
    request.server.closing.wait(30)


class SiteServer:
    """ThreadingHTTPServer on host (127.0.0.1) serving a Site, logging every request it answers.
    HTTP/1.1 with keep-alive, or HTTP/1.0 (one request per connection) without."""

    def __init__(
        self, site: Site, *, delay: float = 0.0, host: str = "127.0.0.1", port: int = 0, keep_alive: bool = True
    ):
        self.site, self.delay, self.keep_alive = site, delay, keep_alive
        self.log: list[tuple[float, str]] = []
        self.headers: list[tuple[str, dict]] = []
        self.requests: list[Request] = []
        self.connections = 0
        self.seen: set[str] = set()
        self.closing = threading.Event()
        self._lock = threading.Lock()
        self.httpd = _CountingHTTPServer((host, port), self._handler(), self)
        self.port = self.httpd.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @classmethod
    def generated(cls, site, *, delay: float = 0.0) -> "SiteServer":
        """A server of a generated site (bench.sitegen), its absolute links spelled with this server's
        address; without a sitemap, so that a crawl finds the pages by their links only."""
        server = cls(Site(), delay=delay)
        server.site.files = site_files(site_at(site, server.url), sitemap=False)
        return server

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def paths(self) -> list[str]:
        with self._lock:
            return [p for _, p in self.log]

    def answer(self, request: Request) -> tuple | None:
        with self._lock:
            self.log.append((time.time(), request.path))
            self.headers.append((request.path, request.headers))
            self.requests.append(request)
            first = request.path not in self.seen
            self.seen.add(request.path)
        if self.delay:
            time.sleep(self.delay)
        path = urlsplit(request.path).path
        answer = self.site.files.get(path, self.site.default)
        if first and path in self.site.once:
            answer = self.site.once[path]
        return answer(request) if callable(answer) else answer

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if server.keep_alive else "HTTP/1.0"

            def do_GET(self):
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length) if length else b""
                request = Request(self.requestline, self.command, self.path, dict(self.headers), body, server)
                answer = server.answer(request)
                if answer is None:
                    self.close_connection = True
                    return
                status, headers, body = answer
                if server.site.etags and status == 200:
                    tag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
                    headers = {**headers, "ETag": tag, "Last-Modified": "Mon, 02 Nov 2026 10:00:00 GMT"}
                    if self.headers.get("If-None-Match") == tag:
                        status, body = 304, b""
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                if status != 304:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self._write(body, server.site.slow.get(urlsplit(self.path).path))

            do_HEAD = do_POST = do_PUT = do_GET  # noqa: N815 - the names http.server calls

            def _write(self, body: bytes, pause: float | None) -> None:
                if pause is None:
                    self.wfile.write(body)
                    return
                for start in range(0, len(body), 65536):
                    self.wfile.write(body[start : start + 65536])
                    time.sleep(pause)

            def log_message(self, *args):
                pass

        return Handler


class _CountingHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, handler, owner: SiteServer):
        self.owner = owner
        super().__init__(address, handler)

    def get_request(self):
        request = super().get_request()
        self.owner.connections += 1
        return request


# --- raw sockets ------------------------------------------------------------------------------------


def head(status: str = "200 OK", **headers) -> bytes:
    """A response head; header names spelled with _ for - (Content_Type=...)."""
    lines = [f"HTTP/1.1 {status}"] + [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def html(body: bytes, status: str = "200 OK", **headers) -> bytes:
    return head(status, Content_Type="text/html", Content_Length=len(body), Connection="close", **headers) + body


def send(data: bytes) -> Callable:
    """A RawServer route that sends data and hangs up."""
    return lambda conn: conn.sendall(data)


def answer(status: str = "200 OK", body: bytes = b"", **headers) -> Callable:
    """A RawServer reply sending one complete response with an honest Content-Length, then closing."""
    headers = {"Content_Type": "text/html", "Content_Length": len(body), "Connection": "close", **headers}
    return lambda conn, server: conn.sendall(head(status, **headers) + body)


def read_request_head(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


class RawServer:
    """Accepts on host and reads one request per connection, then lets `reply(conn, server)` answer,
    or, given a dict, the route of the request's path `routes[path](conn)` (404 for other paths)."""

    def __init__(self, reply: Callable | dict, *, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None):
        self.reply, self.host, self.tls = reply, host, tls
        self.listener = socket.create_server((host, 0))
        self.listener.settimeout(0.05)
        self.port = self.listener.getsockname()[1]
        self.base = f"{'https' if tls else 'http'}://{host}:{self.port}"
        self.accepted = 0
        self.requests: list[bytes] = []
        self.log: list[tuple[float, str]] = []
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def url(self, path: str = "/") -> str:
        return self.base + path

    def __enter__(self) -> "RawServer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        self.stopping.set()
        self._thread.join(5)
        self.listener.close()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(5)
            if self.tls:
                conn = self.tls.wrap_socket(conn, server_side=True)
            request = read_request_head(conn)
            path = request.split(b" ", 2)[1].decode("latin-1") if request.count(b" ") >= 2 else "/"
            self.requests.append(request)
            self.log.append((time.time(), path))
            if callable(self.reply):
                self.reply(conn, self)
            else:
                self.reply.get(path, send(html(b"missing", "404 Not Found")))(conn)
        except (OSError, ssl.SSLError):
            pass  # the client hung up first: cap reached, timeout, or it read all it wanted
        finally:
            conn.close()


def endless_chunked(conn) -> None:
    conn.sendall(head(Content_Type="text/html", Transfer_Encoding="chunked"))
    chunk = b"<p>" + b"x" * 8000 + b"</p>"
    while True:
        conn.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")


def silent(conn) -> None:
    time.sleep(30)


def trickle(every: float = 2.0) -> Callable:
    """A route that announces 1000 bytes and sends one every `every` seconds."""

    def route(conn) -> None:
        conn.sendall(head(Content_Type="text/html", Content_Length=1000))
        for _ in range(30):
            conn.sendall(b"x")
            time.sleep(every)

    return route


def gzip_bomb(size: int = 64 * 1024 * 1024) -> bytes:
    return gzip.compress(bytes(size), compresslevel=9)


def tls_context(tmp: Path, *, expired: bool) -> ssl.SSLContext:
    """A server context with a self-signed certificate for 127.0.0.2, expired if asked."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.2")])
    now = datetime.datetime.now(datetime.UTC)
    start, end = (
        (now - datetime.timedelta(days=30), now - datetime.timedelta(days=1))
        if expired
        else (now, now + datetime.timedelta(days=1))
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.2"))]), False)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp / f"cert-{expired}.pem", tmp / f"key-{expired}.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    return context


class Victim:
    """A TCP listener on 127.0.0.1 that only counts the connections it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self):
        self.sock.close()


# --- the forward proxy ------------------------------------------------------------------------------


class ForwardProxy:
    """Serves CONNECT tunnels and absolute-form http:// requests, asks for Basic credentials when
    given some, and logs every connection it accepts: the witness of what reached it. `failing`: a
    status it answers every request with itself (a broken proxy: 502), never reaching the target."""

    def __init__(self, *, username: str = "", password: str = "", host: str = "127.0.0.1", failing: int = 0):
        self.expected = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode() if username else ""
        self.failing = failing
        self.listener = socket.create_server((host, 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        self.requests: list[tuple[str, str, str]] = []  # (method, target, Proxy-Authorization)
        self.times: list[float] = []  # when each request came
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, *, credentials: str = "") -> str:
        return f"http://{credentials + '@' if credentials else ''}127.0.0.1:{self.port}"

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = read_request_head(conn)
            if b"\r\n\r\n" not in data:
                return
            head, _, rest = data.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
            auth = headers.get("Proxy-Authorization", "")
            self.requests.append((method, target, auth))
            self.times.append(time.time())
            if self.expected and auth != self.expected:
                conn.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
                return
            if self.failing:
                conn.sendall(f"HTTP/1.1 {self.failing} Bad Gateway\r\nContent-Length: 0\r\n\r\n".encode())
                return
            if method == "CONNECT":
                host, port = target.rsplit(":", 1)
                upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                url = urlsplit(target)
                upstream = socket.create_connection((url.hostname, url.port or 80), timeout=10)
                kept = [f"{k}: {v}" for k, v in headers.items() if not k.lower().startswith("proxy-")]
                path = (url.path or "/") + (f"?{url.query}" if url.query else "")
                upstream.sendall(("\r\n".join([f"{method} {path} HTTP/1.1", *kept]) + "\r\n\r\n").encode())
            upstream.sendall(rest)
            _relay(conn, upstream)


def _relay(a: socket.socket, b: socket.socket) -> None:
    def pump(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    other = threading.Thread(target=pump, args=(b, a), daemon=True)
    other.start()
    pump(a, b)
    other.join(10)
    b.close()
