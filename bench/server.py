"""The fallback site server when nginx is not installed: asyncio, HTTP/1.1 keep-alive, static files,
301s from the redirects map, 404 for anything else, and nginx's `bench` access log format.

    python -m bench.server --root SITE --redirects redirects.map --port 18090 --log access.log
"""

import argparse
import asyncio
import posixpath
import signal
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

from bench.sitefiles import read_redirects
from bench.sitegen import content_type

REASONS = {200: "OK", 301: "Moved Permanently", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
HIDDEN = (".sitegen-output",)


class SiteHandler:
    def __init__(self, root: Path, redirects: dict[str, str], log):
        self.root, self.redirects, self.log = root.resolve(), redirects, log

    def answer(self, target: str) -> tuple[int, dict, bytes]:
        """Status, headers and body for a GET of target, as nginx with the bench config answers it."""
        path = posixpath.normpath(unquote(urlsplit(target).path) or "/")
        path = "/" + path.lstrip("/")
        if path in self.redirects:
            return 301, {"Location": self.redirects[path], "Content-Type": "text/html"}, b"<h1>301</h1>\n"
        file = self.root / path.lstrip("/")
        if file.is_dir():
            file = file / "index.html"
        if file.name in HIDDEN or not file.is_file() or self.root not in file.resolve().parents:
            return 404, {"Content-Type": "text/html"}, b"<h1>404 Not Found</h1>\n"
        return 200, {"Content-Type": content_type(file.name)}, file.read_bytes()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _one(self, reader, writer) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        started = time.time()
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ")
        except ValueError:
            method, target, version = "-", "-", "HTTP/1.0"
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        if method in ("GET", "HEAD"):
            status, extra, body = self.answer(target)
        else:
            status, extra, body = (400 if method == "-" else 405), {"Content-Type": "text/plain"}, b"no\n"
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close" and status != 400
        reply = [f"HTTP/1.1 {status} {REASONS[status]}", f"Content-Length: {len(body)}", "Server: bench-fallback"]
        reply += [f"{k}: {v}" for k, v in extra.items()] + [f"Connection: {'keep-alive' if keep else 'close'}"]
        sent = b"" if method == "HEAD" else body
        writer.write(("\r\n".join(reply) + "\r\n\r\n").encode("latin-1") + sent)
        await writer.drain()
        agent = headers.get("user-agent", "-").replace('"', "'")
        self.log.write(
            f'{time.time():.3f} {status} {method} "{target}" {len(sent)} {time.time() - started:.3f} "{agent}"\n'
        )
        return keep


async def main(args: argparse.Namespace) -> None:
    redirects = read_redirects(Path(args.redirects)) if args.redirects else {}
    with open(args.log, "a", buffering=1) as log:  # line-buffered: the checker reads it after the crawl
        handler = SiteHandler(Path(args.root), redirects, log)
        server = await asyncio.start_server(handler.serve, args.host, args.port, backlog=1024, limit=65536)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
            loop.add_signal_handler(sig, stop.set)
        async with server:
            await stop.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", required=True, help="the web root")
    parser.add_argument("--redirects", help="nginx map include of `source target;` lines")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True, help="access log, in the bench format")
    asyncio.run(main(parser.parse_args()))
