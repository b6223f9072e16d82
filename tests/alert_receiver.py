"""A JSON webhook receiver on loopback for alert tests: keeps every JSON body POSTed to it (Apprise's
json:// sends {"version", "title", "message", "type", ...})."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonReceiver:
    def __init__(self, host: str = "127.0.0.1"):
        self.received: list[dict] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with owner._lock:
                    owner.received.append(json.loads(body or b"{}"))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def apprise_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"json://{host}:{port}/alerts"

    def messages(self, text: str = "") -> list[dict]:
        with self._lock:
            return [m for m in self.received if text in m.get("title", "") + m.get("message", "")]

    def __enter__(self) -> "JsonReceiver":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
