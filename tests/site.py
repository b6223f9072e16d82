"""A deterministic test website with ground truth, served on 127.0.0.1 by a real HTTP server.

The shape follows the shared benchmark site at a smaller scale: a spanning tree of pages plus
random links, link noise (fragments, relative paths, query-order variants, mailto/javascript,
external *.invalid hosts), robots-disallowed /private/ links, 404s, 301s, a redirect loop,
shared images and a few videos.
"""

import hashlib
import random
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


@dataclass
class Site:
    files: dict = field(default_factory=dict)  # path -> (status, headers, body)
    pages: set = field(default_factory=set)  # paths of reachable, allowed 200 pages (canonical)
    missing: set = field(default_factory=set)
    redirects: dict = field(default_factory=dict)
    private: set = field(default_factory=set)
    media: dict = field(default_factory=dict)  # path -> sha256
    slow: dict = field(default_factory=dict)  # path -> seconds to wait between 64 KiB chunks
    etags: bool = False  # send ETag/Last-Modified and answer 304 to matching conditional requests
    once: dict = field(default_factory=dict)  # path -> (status, headers, body) answered the first time only


def _page_path(i: int) -> str:
    return "/" if i == 0 else f"/s{i % 7:02d}/p{i:05d}.html"


def build_site(n: int = 300, seed: int = 7) -> Site:
    rng = random.Random(seed)
    site = Site()
    site.files["/robots.txt"] = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /private/\n")
    images = {k: rng.randbytes(rng.randint(2000, 6000)) for k in range(max(3, n // 20))}
    for k, data in images.items():
        site.files[f"/media/img/i{k:04d}.jpg"] = (200, {"Content-Type": "image/jpeg"}, data)
    videos = {k: rng.randbytes(50_000) for k in range(max(1, n // 100))}
    for k, data in videos.items():
        site.files[f"/media/video/v{k:03d}.mp4"] = (200, {"Content-Type": "video/mp4"}, data)
    # Not linked from any page: targets for the bad-input tests.
    site.files["/error500"] = (500, {"Content-Type": "text/html"}, b"<h1>oops</h1>")
    site.files["/data.bin"] = (200, {"Content-Type": "application/octet-stream"}, bytes(range(256)) * 8)
    site.files["/loop/a.html"] = (301, {"Location": "/loop/b.html"}, b"")
    site.files["/loop/b.html"] = (301, {"Location": "/loop/a.html"}, b"")
    for i in range(n):
        _add_page(site, i, n, rng, images, videos)
    return site


def _add_page(site: Site, i: int, n: int, rng: random.Random, images: dict, videos: dict) -> None:
    path = _page_path(i)
    site.pages.add(path)
    links = [_page_path(c) for c in range(8 * i + 1, min(n, 8 * i + 9))]
    links += [_page_path(rng.randrange(n)) + rng.choice(["", "#top", "#sec-2"]) for _ in range(5)]
    links += ["mailto:someone@example.invalid", "javascript:void(0)", "#main", "http://external.invalid/x"]
    media_html = ""
    if i % 10 == 3:
        k = rng.randrange(len(images))
        media_html += f'<img src="/media/img/i{k:04d}.jpg" alt="">'
        site.media[f"/media/img/i{k:04d}.jpg"] = hashlib.sha256(images[k]).hexdigest()
    if i % 50 == 7:
        k = rng.randrange(len(videos))
        media_html += f'<video controls><source src="/media/video/v{k:03d}.mp4" type="video/mp4"></video>'
        site.media[f"/media/video/v{k:03d}.mp4"] = hashlib.sha256(videos[k]).hexdigest()
    if i % 20 == 5:
        links.append(f"/private/q{i}.html")
        site.private.add(f"/private/q{i}.html")
        site.files[f"/private/q{i}.html"] = (200, {"Content-Type": "text/html"}, b"<p>secret</p>")
    if i % 25 == 9:
        links.append(f"/missing/m{i}.html")
        site.missing.add(f"/missing/m{i}.html")
    if i % 30 == 11:
        target = _page_path(rng.randrange(1, n))
        links.append(f"/go/r{i}")
        site.redirects[f"/go/r{i}"] = target
        site.files[f"/go/r{i}"] = (301, {"Location": target}, b"")
    if i == 1:
        links += ["/loop/a.html", "/s01/p00001.html?b=2&a=1", "/s01/p00001.html?a=1&b=2"]
        site.pages.add("/s01/p00001.html?a=1&b=2")
    anchors = "".join(f'<a href="{h}">link</a> ' for h in links)
    body = (
        f"<!doctype html><html lang=en><head><title>Page {i}</title></head>"
        f"<body><main><h1>Page {i}</h1><p>Words of page {i}.</p>{media_html}{anchors}</main></body></html>"
    ).encode()
    site.files[path] = (200, {"Content-Type": "text/html; charset=utf-8"}, body)


class SiteServer:
    """ThreadingHTTPServer on 127.0.0.1 serving a Site, logging every request it answers."""

    def __init__(self, site: Site, delay: float = 0.0):
        self.site, self.delay = site, delay
        self.log: list[tuple[float, str]] = []
        self.headers: list[tuple[str, dict]] = []
        self.seen: set[str] = set()
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def paths(self) -> list[str]:
        with self._lock:
            return [p for _, p in self.log]

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                with server._lock:
                    server.log.append((time.time(), self.path))
                    server.headers.append((self.path, dict(self.headers)))
                    first = self.path not in server.seen
                    server.seen.add(self.path)
                if server.delay:
                    time.sleep(server.delay)
                path = urlsplit(self.path).path
                missing = (404, {"Content-Type": "text/html"}, b"gone")
                status, headers, body = server.site.files.get(path, missing)
                if first and path in server.site.once:
                    status, headers, body = server.site.once[path]
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
                pause = server.site.slow.get(path)
                if pause is None:
                    self.wfile.write(body)
                    return
                for start in range(0, len(body), 65536):
                    self.wfile.write(body[start : start + 65536])
                    time.sleep(pause)

            def log_message(self, *args):
                pass

        return Handler


if __name__ == "__main__":  # serve the site by hand: python -m tests.site [N]
    import sys

    with SiteServer(build_site(int(sys.argv[1]) if len(sys.argv) > 1 else 300)) as srv:
        print(srv.url, flush=True)
        threading.Event().wait()
