"""Raw-socket servers that misbehave on purpose, for the hostile-input table (127.0.0.2 by default)."""

import datetime
import gzip
import socket
import ssl
import threading
import time
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def head(status: str = "200 OK", **headers) -> bytes:
    lines = [f"HTTP/1.1 {status}"] + [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def html(body: bytes, status: str = "200 OK", **headers) -> bytes:
    return head(status, Content_Type="text/html", Content_Length=len(body), Connection="close", **headers) + body


class HostileServer:
    """Reads one request per connection and lets routes[path](conn) answer however it likes."""

    def __init__(self, routes: dict, *, host: str = "127.0.0.2", tls: ssl.SSLContext | None = None):
        self.routes, self.tls = routes, tls
        self.listener = socket.create_server((host, 0))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.base = f"{'https' if tls else 'http'}://{host}:{self.port}"
        self.log: list[tuple[float, str]] = []
        self.stopping = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def close(self) -> None:
        self.stopping.set()
        self.listener.close()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            if self.tls:
                conn = self.tls.wrap_socket(conn, server_side=True)
            request = conn.recv(65536).decode("latin-1")
            path = request.split(" ", 2)[1] if request.count(" ") >= 2 else "/"
            self.log.append((time.time(), path))
            self.routes.get(path, lambda c: c.sendall(html(b"missing", "404 Not Found")))(conn)
        except (OSError, ssl.SSLError):
            pass
        finally:
            conn.close()


def endless_chunked(conn) -> None:
    conn.sendall(head(Content_Type="text/html", Transfer_Encoding="chunked"))
    chunk = b"<p>" + b"x" * 8000 + b"</p>"
    while True:
        conn.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")


def silent(conn) -> None:
    time.sleep(30)


def trickle(conn) -> None:
    conn.sendall(head(Content_Type="text/html", Content_Length=1000))
    for _ in range(30):
        conn.sendall(b"x")
        time.sleep(2)


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
    import ipaddress

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
