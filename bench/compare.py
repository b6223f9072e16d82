"""make bench: crawlhub distributed and embedded, then the Scrapy peer, on the same site; a ratio table.

With the optional shared benchmark (a shared/bench folder beside the repository, when present): its
site served by its nginx, and its Scrapy peer
(run_scrapy.sh --conc 64 --dedup 1). Without it: our own generated 10,000-page site, our rows only.
The table goes to stdout and to var/bench/latest.md, every figure to var/bench/latest.json.

    python -m bench.compare [--modes distributed,distributed-per-queue,embedded] [--pages N] [--no-scrapy]

"distributed" is one worker -c 2 on the three queues; "distributed-per-queue" the docs' layout (docs/distributed.md),
one worker per stage queue (fetch -c 4, extract -c 2, download -c 2).
"""

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench import REPO

SHARED = REPO.parent / "shared" / "bench"
SHARED_URL = "http://127.0.0.1:18089/"
PEER_NAME = "crawlhub_peer"
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/crawlhub"  # scripts/services.sh's PostgreSQL
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/14"  # its Redis, a database the tests do not use
TARGETS = {"distributed": 2.0, "embedded": 1.0}  # pages/s as a multiple of Scrapy's
EMBEDDED_TARGETS = {"distributed": 1.1, "distributed-per-queue": 1.0}  # pages/s as a multiple of embedded
CPU_MS_TARGET, STATEMENTS_TARGET, RSS_GROWTH_TARGET = 3.0, 2.0, 0.20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default="distributed,distributed-per-queue,embedded")
    parser.add_argument("--pages", type=int, default=10_000, help="our generated site's pages (no shared bench)")
    parser.add_argument("--no-scrapy", action="store_true", help="skip the Scrapy peer")
    args = parser.parse_args(argv)
    shared = SHARED.is_dir()
    env = _distributed_env()
    rows = {}
    with SharedServer() if shared else contextlib.nullcontext():
        for mode in args.modes.split(","):
            rows[mode] = _bench(mode, shared=shared, pages=args.pages, env=env)
    peer = _scrapy() if shared and not args.no_scrapy else None
    note = None if peer else ("the Scrapy peer was skipped" if shared else "the Scrapy peer was not available")
    text = markdown(rows, peer, note=note)
    print(text)
    out = REPO / "var" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "latest.md").write_text(text + "\n")
    record = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "crawlhub": rows, "scrapy": peer}
    (out / "latest.json").write_text(json.dumps(record, indent=1) + "\n")
    return 0


def _distributed_env() -> dict:
    """The configured database and broker; the services' PostgreSQL and Redis when none is configured."""
    configured = _dotenv_keys(REPO / ".env")
    env = dict(os.environ)
    if "DATABASE_URL" not in env and "DATABASE_URL" not in configured:
        env["DATABASE_URL"] = DEFAULT_DATABASE_URL
    if "CELERY_BROKER_URL" not in env and "CELERY_BROKER_URL" not in configured:
        env["CELERY_BROKER_URL"] = DEFAULT_BROKER_URL
    return env


def _dotenv_keys(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {line.split("=", 1)[0].strip() for line in path.read_text().splitlines() if "=" in line}


class SharedServer:
    """The shared bench's nginx, started (after its setup, when needed) and stopped only if we started it."""

    def __enter__(self):
        if not ((SHARED / "ground_truth.json").exists() and (SHARED / "site" / "index.html").exists()):
            subprocess.run([str(SHARED / "setup.sh")], check=True)
        self.started = subprocess.run([str(SHARED / "serve.sh"), "status"], capture_output=True).returncode != 0
        if self.started:
            subprocess.run([str(SHARED / "serve.sh"), "start"], check=True)
        return self

    def __exit__(self, *exc):
        if self.started:
            subprocess.run([str(SHARED / "serve.sh"), "stop"], check=False)
        return False


def _bench(mode: str, *, shared: bool, pages: int, env: dict) -> dict:
    base_mode, _, layout = mode.partition("-")
    command = [sys.executable, "manage.py", "bench", "--mode", base_mode, "--json"]
    if layout:
        command += ["--layout", layout]
    if shared:
        subprocess.run([str(SHARED / "serve.sh"), "truncate-log"], check=True)
        command += [
            "--site",
            str(SHARED),
            "--base-url",
            SHARED_URL,
            "--access-log",
            str(SHARED / "logs" / "access.log"),
        ]
    else:
        command += ["--pages", str(pages)]
    print(f"$ {' '.join(command)}", file=sys.stderr, flush=True)
    done = subprocess.run(command, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench --mode {mode} failed ({done.returncode}):\n{done.stdout[-2000:]}")
    *shown, last = done.stdout.strip().splitlines()
    print("\n".join(shown), file=sys.stderr, flush=True)
    return json.loads(last)


def _scrapy() -> dict:
    command = [str(SHARED / "run_scrapy.sh"), "--conc", "64", "--dedup", "1", "--reps", "1", "--name", PEER_NAME]
    print(f"$ {' '.join(command)}", file=sys.stderr, flush=True)
    subprocess.run(command, check=True)
    return json.loads((SHARED / "results" / f"{PEER_NAME}.json").read_text())["runs"][0]


def markdown(rows: dict[str, dict], peer: dict | None, *, note: str | None = None) -> str:
    """The ratio table, then the targets, in Markdown."""
    base = peer["pages_per_s"] if peer else None
    lines = [
        "| crawler | pages/s | × Scrapy | CPU ms/page | SQL statements/page | Redis commands/page | peak RSS MB "
        "| completeness | duplicate items | duplicate requests | robots violations |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode, r in rows.items():
        rss = sum(r["peak_rss_mb"].get(role, {}).get("sum", 0) for role in ("crawl_command", "workers"))
        cells = [f"crawlhub {mode}", f"{r['pages_per_s']:.0f}", _ratio(r["pages_per_s"], base)]
        cells += [
            f"{r['cpu_ms_per_page']:.2f}",
            _fmt(r["statements_per_page"], 2),
            _fmt(r["redis_commands_per_page"], 2),
        ]
        cells += [f"{rss:.0f}", f"{r['completeness']:.2%}", str(r["duplicate_items"])]
        cells += [_fmt(r["duplicate_requests"]), _fmt(r["robots_violations"])]
        lines.append(_row(cells))
    if peer:
        cells = ["Scrapy (c=64, seen-set)", f"{peer['pages_per_s']:.0f}", "1.00", f"{peer['cpu_ms_per_page']:.2f}"]
        cells += ["–", "–", f"{peer['max_rss_mb']:.0f}", f"{peer['completeness']:.2%}", str(peer["duplicate_items"])]
        cells += [str(peer["duplicate_requests"]), str(peer["robots_violations"])]
        lines.append(_row(cells))
    lines += ["", *_targets(rows, base)]
    if note:
        lines += ["", f"Note: {note}; ratios to Scrapy are not shown."]
    lines += ["", _caption(rows)]
    return "\n".join(lines)


def _targets(rows: dict[str, dict], base: float | None) -> list[str]:
    out = ["| target | figure | met |", "|---|---:|---|"]
    embedded = rows.get("embedded", {}).get("pages_per_s")
    for mode, wanted in EMBEDDED_TARGETS.items():
        if mode in rows and embedded:
            ratio = rows[mode]["pages_per_s"] / embedded
            out.append(f"| {mode} ≥ {wanted:g}× embedded's pages/s | {ratio:.2f}× | {_met(ratio >= wanted)} |")
    for mode, r in rows.items():
        if mode in TARGETS and base:
            ratio = r["pages_per_s"] / base
            out.append(
                f"| {mode} ≥ {TARGETS[mode]:g}× Scrapy's pages/s | {ratio:.2f}× | {_met(ratio >= TARGETS[mode])} |"
            )
        cpu, sql = r["cpu_ms_per_page"], r["statements_per_page"]
        out.append(f"| {mode}: ≤ {CPU_MS_TARGET:g} CPU ms/page | {cpu:.2f} | {_met(cpu <= CPU_MS_TARGET)} |")
        out.append(
            f"| {mode}: ≤ {STATEMENTS_TARGET:g} SQL statements/page | {sql:.2f} | {_met(sql <= STATEMENTS_TARGET)} |"
        )
        if r.get("rss_at_100k") and r.get("rss_at_1k"):
            growth = r["rss_at_100k"]["max_mb"] / r["rss_at_1k"]["max_mb"] - 1
            out.append(
                f"| {mode}: worker RSS at 100k within 20% of 1k | {growth:+.0%} | {_met(growth <= RSS_GROWTH_TARGET)} |"
            )
        elif r.get("rss_at_end") and r.get("rss_at_1k"):  # a smaller site: the growth it did show
            first, last = r["rss_at_1k"], r["rss_at_end"]
            growth = last["max_mb"] / first["max_mb"] - 1
            span = f"{first['discovered']:,} → {last['discovered']:,} URLs"
            out.append(f"| {mode}: worker RSS growth, {span} (100k not reached) | {growth:+.0%} | – |")
    return out


def _caption(rows: dict[str, dict]) -> str:
    r = next(iter(rows.values()))
    m = r["machine"]
    return (
        f"{r['date']}, {m['cores']} cores ({m.get('cpu')}), Python {m['python']}, site {r['site']} "
        f"({r['site_pages']:,} pages), machine speed probe {m.get('speed_probe_s')} CPU s before/after the "
        "first crawl (lower is faster). CPU ms/page counts the crawl command, the workers and, when distributed, "
        "the whole PostgreSQL server and Redis (every client of either); not the web server. "
        "Peak RSS: crawl command + workers, summed over processes; Scrapy's is its one process."
    )


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _ratio(value: float, base: float | None) -> str:
    return f"{value / base:.2f}" if base else "–"


def _fmt(value, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _met(ok: bool) -> str:
    return "yes" if ok else "**no**"


if __name__ == "__main__":
    sys.exit(main())
