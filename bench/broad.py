"""The broad scenario: H hosts of P pages on their own loopback addresses, robots.txt `Crawl-delay: D`,
crawled by crawlhub (embedded, distributed) and, in the same run, by the Scrapy broad-crawl peer.

    python -m bench.broad [--hosts 100] [--pages 31] [--delay 1] [--modes embedded,distributed] [--no-scrapy]

Every figure is read from the server's access log: wall time (first request to last), pages served,
completeness, duplicate requests, and the smallest gap between two page requests to one host. The
politeness floor is P requests a host, each slot D + 0.1 s apart (crawlhub's slot margin), all hosts
at once. The table goes to stdout and var/bench/broad-HxP.md, the figures to var/bench/broad-HxP.json.
"""

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

from bench import REPO, BenchError

SHARED_SPIDER = REPO.parent / "shared" / "bench" / "scrapy_broad_spider.py"
PEER_VENV = REPO / "var" / "bench" / "peer-venv"
PEER_REQUIREMENT = "Scrapy==2.19.0"
PORT = 18300
SLOT_MARGIN = 0.1


def log_report(lines: list[str], *, hosts: int, pages: int) -> dict:
    """Politeness and completeness from the access log's lines ("time host path status")."""
    times, served, requests, robots = defaultdict(list), set(), 0, 0
    for line in lines:
        stamp, host, path, status = line.split()
        if path == "/robots.txt":
            robots += 1
            continue
        requests += 1
        times[host].append(float(stamp))
        if status == "200":
            served.add((host, path))
    gaps = [b - a for stamps in times.values() for a, b in pairwise(sorted(stamps))]
    stamps = [t for host_times in times.values() for t in host_times]
    return {
        "pages_served": len(served),
        "completeness": len(served) / (hosts * pages),
        "duplicate_requests": requests - len(served),
        "robots_requests": robots,
        "min_gap_s": round(min(gaps), 3) if gaps else None,
        "span_s": round(max(stamps) - min(stamps), 2) if stamps else None,
    }


class BroadServer:
    """bench.broadsite in a process of its own, logging to `log`."""

    def __init__(self, *, hosts: int, pages: int, delay: float, log: Path):
        self.args = ["--hosts", str(hosts), "--pages", str(pages), "--delay", str(delay), "--port", str(PORT)]
        self.log = log

    def __enter__(self):
        self.log.write_text("")
        command = [sys.executable, "-m", "bench.broadsite", *self.args, "--log", str(self.log)]
        self.process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
        if self.process.stdout.readline().strip() != "ready":
            raise BenchError("the broad site's server did not start")
        return self

    def lines(self) -> list[str]:
        return [line for line in self.log.read_text().splitlines() if line]

    def truncate(self) -> None:
        self.log.write_text("")

    def __exit__(self, *exc):
        self.process.terminate()
        self.process.wait(10)
        return False


def crawlhub_run(mode: str, urls: list[str], *, workers: int, timeout: float) -> dict:
    """One crawl of every host by `manage.py crawl`, on scratch state (bench/scratch.py)."""
    from django.conf import settings

    from bench.scratch import scratch_distributed, scratch_embedded, scratch_prepare
    from bench.workers import WorkerPool
    from crawlproject.celery import app

    var = Path(settings.VAR_DIR)
    if mode == "embedded":
        scratch = scratch_embedded(var)
    else:
        database, broker = settings.DATABASES["default"], settings.CELERY_BROKER_URL
        scratch = scratch_distributed(var, database=database, broker_url=broker)
    scratch_prepare(scratch)
    pool = None
    if mode == "distributed":
        WorkerPool.refuse_others(app)
        pool = WorkerPool(layout="one", concurrency=workers, env=scratch.env, log_dir=scratch.dir)
        pool.start()
        pool.wait_ready(app)
    command = [sys.executable, "manage.py", "crawl", *urls, "--project", "broad", "--allow-private", "--json"]
    command += ["--no-media", "--timeout", str(timeout), "--workers", str(workers if mode == "embedded" else 0)]
    try:
        started = time.monotonic()
        done = subprocess.run(command, cwd=REPO, env=scratch.env, capture_output=True, text=True)
        seconds = time.monotonic() - started
    finally:
        if pool:
            pool.stop()
    if done.returncode != 0:
        raise BenchError(f"the {mode} crawl failed ({done.returncode}): {done.stderr[-1500:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return {"command_s": round(seconds, 2), "pages_done": summary["pages_fetched"], "failed": summary["pages_failed"]}


def scrapy_run(urls: list[str], scratch: Path) -> dict | None:
    """The shared Scrapy broad-crawl peer, when the shared benchmark is there (its venv made once)."""
    if not SHARED_SPIDER.exists():
        return None
    if not (PEER_VENV / "bin" / "scrapy").exists():
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
        subprocess.run([str(PEER_VENV / "bin" / "pip"), "install", "-q", PEER_REQUIREMENT], check=True)
    seeds = scratch / "seeds.txt"
    seeds.write_text("\n".join(urls) + "\n")
    items = scratch / "scrapy-items.jl"
    items.unlink(missing_ok=True)
    command = [str(PEER_VENV / "bin" / "scrapy"), "runspider", str(SHARED_SPIDER), "-a", f"urls_file={seeds}"]
    started = time.monotonic()
    subprocess.run([*command, "-O", f"{items}:jsonlines"], cwd=scratch, check=True, capture_output=True)
    return {"command_s": round(time.monotonic() - started, 2)}


def markdown(rows: dict, *, hosts: int, pages: int, delay: float) -> str:
    floor = pages * (delay + SLOT_MARGIN)
    peer = rows.get("scrapy")
    lines = [
        f"Broad crawl: {hosts} hosts x {pages} pages, Crawl-delay {delay:g} s; politeness floor {floor:.1f} s "
        f"({pages} requests a host, {delay + SLOT_MARGIN:g} s apart).",
        "",
        "| crawler | wall s (log) | command s | × floor | × Scrapy speed | pages | completeness | smallest gap s "
        "| duplicate requests |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in rows.items():
        speed = f"{peer['span_s'] / row['span_s']:.2f}" if peer and row.get("span_s") else "–"
        lines.append(
            f"| {name} | {row['span_s']} | {row['command_s']} | {row['span_s'] / floor:.2f} | {speed} "
            f"| {row['pages_served']} | {row['completeness']:.1%} | {row['min_gap_s']} | {row['duplicate_requests']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--pages", type=int, default=31)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--modes", default="embedded,distributed")
    parser.add_argument("--workers", type=int, default=2, help="pool processes (one worker, every queue)")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--no-scrapy", action="store_true")
    args = parser.parse_args(argv)
    _django()
    from django.conf import settings

    out = Path(settings.VAR_DIR) / "bench"
    out.mkdir(parents=True, exist_ok=True)
    from bench.broadsite import site_urls

    urls = site_urls(args.hosts, PORT)
    rows = {}
    with BroadServer(hosts=args.hosts, pages=args.pages, delay=args.delay, log=out / "broad-access.log") as server:
        for mode in filter(None, args.modes.split(",")):  # none: the peer alone
            server.truncate()
            print(f"crawlhub {mode}: {args.hosts} hosts x {args.pages} pages ...", file=sys.stderr, flush=True)
            row = crawlhub_run(mode, urls, workers=args.workers, timeout=args.timeout)
            rows[f"crawlhub {mode}"] = row | log_report(server.lines(), hosts=args.hosts, pages=args.pages)
        if not args.no_scrapy:
            server.truncate()
            print("Scrapy broad peer ...", file=sys.stderr, flush=True)
            peer = scrapy_run(urls, out)
            if peer:
                rows["scrapy"] = peer | log_report(server.lines(), hosts=args.hosts, pages=args.pages)
    text = markdown(rows, hosts=args.hosts, pages=args.pages, delay=args.delay)
    print(text)
    name = f"broad-{args.hosts}x{args.pages}"
    (out / f"{name}.md").write_text(text + "\n")
    record = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "args": vars(args), "rows": rows}
    (out / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
    return 0


def _django() -> None:
    """Django for the scratch helpers, on the configured (else the services') database and broker."""
    from bench.compare import _distributed_env

    for key in ("DATABASE_URL", "CELERY_BROKER_URL"):
        with contextlib.suppress(KeyError):
            os.environ.setdefault(key, _distributed_env()[key])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crawlproject.settings")
    import django

    django.setup()


if __name__ == "__main__":
    sys.exit(main())
