"""The broad-crawl site: H hosts of P pages, each host on its own loopback address (127.1.x.y: Linux
routes all of 127/8 to `lo`), every robots.txt asking for `Crawl-delay: D`. One process serves them
all and logs every request with the time its first bytes reached the host: the kernel's receive
timestamp (SO_TIMESTAMPNS), not the time this process got round to reading it, so politeness is
read from the host's side and a busy server does not blur it.

    python -m bench.broadsite --hosts 100 --pages 31 --delay 1 --port 18300 --log access.log
"""

import argparse
import asyncio
import contextlib
import os
import resource
import signal
import socket
import struct
import time
from pathlib import Path

WORDS = [
    "polite",
    "crawler",
    "host",
    "slot",
    "delay",
    "frontier",
    "lease",
    "queue",
    "fetch",
    "extract",
    "page",
    "link",
    "robots",
]


def host_addresses(hosts: int) -> list[str]:
    """127.1.0.1, 127.1.0.2, ... 250 a block, so every address is a valid host of its own."""
    return [f"127.1.{i // 250}.{i % 250 + 1}" for i in range(hosts)]


def site_urls(hosts: int, port: int) -> list[str]:
    return [f"http://{address}:{port}/" for address in host_addresses(hosts)]


def page_paths(pages: int) -> list[str]:
    return ["/", *(f"/p{i}.html" for i in range(1, pages))]


def page_body(path: str, pages: int) -> bytes:
    """The index links every page; a page links the index and its neighbours (links seen twice)."""
    if path == "/":
        links = page_paths(pages)[1:]
    else:
        number = int(path[2:-5])
        links = ["/", f"/p{max(1, number - 1)}.html", f"/p{min(pages - 1, number + 1)}.html"]
    text = " ".join(WORDS[(len(path) + i) % len(WORDS)] for i in range(120))
    anchors = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    html = f"<html><head><title>{path}</title></head><body><p>{text}</p><ul>{anchors}</ul></body></html>"
    return html.encode()


# Linux (asm-generic): the socket option that stamps each received packet with the kernel's clock,
# and the control message that carries the stamp (struct timespec) to recvmsg.
SO_TIMESTAMPNS = SCM_TIMESTAMPNS = 35
STAMP = struct.Struct("qq")


class BroadSite:
    def __init__(self, pages: int, delay: float, log):
        self.pages, self.log = pages, log
        self.bodies = {path: page_body(path, pages) for path in page_paths(pages)}
        self.robots = f"User-agent: *\nCrawl-delay: {delay:g}\n".encode()

    def answer(self, path: str) -> tuple[int, str, bytes]:
        if path == "/robots.txt":
            return 200, "text/plain", self.robots
        body = self.bodies.get(path.split("?")[0])
        return (200, "text/html; charset=utf-8", body) if body else (404, "text/html", b"<h1>404</h1>")

    def respond(self, host: str, head: bytes, stamp: float) -> bytes:
        target = head.split(b" ", 2)[1].decode("latin-1")
        status, kind, body = self.answer(target)
        self.log.write(f"{stamp:.6f} {host} {target} {status}\n")
        reason = b"OK" if status == 200 else b"Not Found"
        head = b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
        return head % (status, reason, kind.encode(), len(body)) + body


class Connection:
    """One client connection, HTTP/1.1 keep-alive: each request is logged at the kernel's receive
    time of its first bytes."""

    def __init__(self, site: BroadSite, sock: socket.socket, host: str, loop):
        self.site, self.sock, self.host, self.loop = site, sock, host, loop
        self.buffer, self.stamp = b"", 0.0
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        loop.add_reader(sock.fileno(), self.readable)

    def readable(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(STAMP.size), socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.close()
            return
        if not self.buffer:  # a new request starts with these bytes
            self.stamp = next((_stamp(raw) for _, kind, raw in ancillary if kind == SCM_TIMESTAMPNS), time.time())
        self.buffer += data
        try:
            while b"\r\n\r\n" in self.buffer:
                head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
                self.sock.sendall(self.site.respond(self.host, head, self.stamp))  # a blocking socket: small pages
        except (OSError, IndexError):
            self.close()

    def close(self) -> None:
        self.loop.remove_reader(self.sock.fileno())
        self.sock.close()


def _stamp(raw: bytes) -> float:
    seconds, nanoseconds = STAMP.unpack(raw[: STAMP.size])
    return seconds + nanoseconds / 1e9


async def serve(hosts: int, pages: int, delay: float, port: int, log_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4 * hosts + 1024)), hard))
    loop = asyncio.get_running_loop()
    with open(log_path, "a", buffering=1) as log:
        site = BroadSite(pages, delay, log)
        listeners = []
        for address in host_addresses(hosts):
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((address, port))
            listener.listen(1024)
            listener.setblocking(False)
            loop.add_reader(listener.fileno(), _accept, site, listener, address, loop)
            listeners.append(listener)
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        print("ready", flush=True)
        await stop.wait()
        for listener in listeners:
            loop.remove_reader(listener.fileno())
            listener.close()


def _accept(site: BroadSite, listener: socket.socket, host: str, loop) -> None:
    while True:
        try:
            sock, _ = listener.accept()
        except BlockingIOError:
            return
        sock.setblocking(True)
        Connection(site, sock, host, loop)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--pages", type=int, default=31)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--port", type=int, default=18300)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args()
    with contextlib.suppress(OSError):  # the clock of every figure: ahead of the crawlers for the CPU (when allowed)
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    asyncio.run(serve(args.hosts, args.pages, args.delay, args.port, args.log))


if __name__ == "__main__":
    main()
