"""A plain forward proxy for tests, standing for a project's own proxy (a corporate Squid, say).

It serves CONNECT tunnels and absolute-form http:// requests, asks for Basic credentials when given
some, and logs every connection it accepts: the witness of what reached it.
"""

import base64
import contextlib
import socket
import threading
from urllib.parse import urlsplit


class ForwardProxy:
    def __init__(self, *, username: str = "", password: str = "", host: str = "127.0.0.1"):
        self.expected = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode() if username else ""
        self.listener = socket.create_server((host, 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        self.requests: list[tuple[str, str, str]] = []  # (method, target, Proxy-Authorization)
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
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            head, rest = head.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
            auth = headers.get("Proxy-Authorization", "")
            self.requests.append((method, target, auth))
            if self.expected and auth != self.expected:
                conn.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
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
