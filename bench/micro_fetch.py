"""What the page fetcher's HTTP client costs: core.net.client.fetch_many over a local site, nothing else.

The site (~2.5 KB pages) is served by another process (nginx when installed, else bench.server),
so this process's CPU (getrusage) is the client's alone: connections, HTTP parsing, the guard, the
capped body reads. Each repetition fetches every page once, REQUESTS in flight, after a warm-up.

    python -m bench.micro_fetch [--json]                          # this checkout's make_client()
    PYTHONPATH=../other-checkout python bench/micro_fetch.py      # another checkout's, to compare
"""

import argparse
import asyncio
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: this checkout, after PYTHONPATH (another checkout wins)
    sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.serving import port_free, site_serve
from core.canonical import server_of
from core.net.client import FetchLimits, FetchRequest, fetch_many, make_client

PAGE_BYTES = 2500
LIMITS = FetchLimits(connect_timeout=10, read_timeout=20, total_timeout=60, max_bytes=10 * 1024 * 1024)


def write_site(root: Path, pages: int) -> list[str]:
    """pages HTML files of about PAGE_BYTES each under root; their paths."""
    paths = []
    for i in range(pages):
        links = "".join(f'<a href="/p/{(i * 7 + k) % pages}.html">page {(i * 7 + k) % pages}</a>\n' for k in range(20))
        body = f"<html><head><title>page {i}</title></head><body>\n{links}"
        body += "<p>" + "lorem ipsum dolor sit amet " * ((PAGE_BYTES - len(body)) // 27) + "</p></body></html>\n"
        (root / "p").mkdir(exist_ok=True)
        (root / "p" / f"{i}.html").write_text(body)
        paths.append(f"/p/{i}.html")
    return paths


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def measure(client, urls: list[str], requests: int) -> dict:
    """Fetch every URL once; CPU ms per page of this process, pages/s, and the failures."""
    host = {server_of(urls[0]): requests}
    batch = [FetchRequest(url=url) for url in urls]
    cpu, wall = cpu_seconds(), time.perf_counter()
    responses = await fetch_many(client, batch, limits=LIMITS, concurrency=requests, per_host=host)
    cpu, wall = cpu_seconds() - cpu, time.perf_counter() - wall
    failed = sum(1 for r in responses if r.status_code != 200 or r.error_code)
    return {"cpu_ms_per_page": 1000 * cpu / len(urls), "pages_per_s": len(urls) / wall, "failed": failed}


async def run(args, base: str, paths: list[str]) -> list[dict]:
    urls = [f"{base}{path}" for path in paths]
    async with make_client(allow_private=True) as client:
        await measure(client, urls[: args.requests * 4], args.requests)  # connections and caches warm
        return [await measure(client, urls, args.requests) for _ in range(args.repeat)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--requests", type=int, default=32, help="requests in flight")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--port", type=int, default=18097)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line last")
    args = parser.parse_args()
    if not port_free(args.port):
        sys.exit(f"port {args.port} on 127.0.0.1 is in use: pass --port")
    with tempfile.TemporaryDirectory(prefix="micro-fetch-") as scratch:
        root, redirects = Path(scratch, "site"), Path(scratch, "redirects.map")
        root.mkdir()
        redirects.write_text("")
        paths = write_site(root, args.pages)
        server = site_serve(web_root=root, redirects=redirects, port=args.port, scratch=Path(scratch, "server"))
        try:
            runs = asyncio.run(run(args, f"http://127.0.0.1:{args.port}", paths))
        finally:
            server.stop()
    report(args, server.kind, runs)


def report(args, server: str, runs: list[dict]) -> None:
    for n, figures in enumerate(runs, 1):
        print(
            f"run {n}: {figures['cpu_ms_per_page']:.3f} CPU ms/page  {figures['pages_per_s']:.0f} pages/s"
            f"  failed {figures['failed']}"
        )
    cpu = statistics.median(r["cpu_ms_per_page"] for r in runs)
    rate = statistics.median(r["pages_per_s"] for r in runs)
    print(f"median {cpu:.3f} CPU ms/page, {rate:.0f} pages/s ({args.pages} pages, server {server})")
    if args.json:
        figures = {"server": server, "cpu_ms_per_page": cpu, "pages_per_s": rate}
        print(json.dumps(figures | {"runs": runs}))


if __name__ == "__main__":
    main()
