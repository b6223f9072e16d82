"""The figures of a run: one flat-ish dict (the --json line) and a readable table of it."""

import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench import REPO
from bench.machine import machine_facts

CRAWLER_ROLES = ("crawl_command", "workers", "postgres", "redis")  # the server is not the crawler
ROLE_NAMES = {
    "crawl_command": "crawl command",
    "workers": "workers",
    "postgres": "PostgreSQL",
    "redis": "Redis",
    "server": "web server",
}


def result_build(
    *,
    options,
    site_dir,
    truth,
    server,
    crawl,
    seconds,
    cpu,
    sampler,
    statements,
    redis_commands,
    pages,
    served,
    scratch,
    postgres_version,
    speed_probe_s=None,
) -> dict:
    n = max(1, pages["items"])
    per_page = lambda value: None if value is None else round(value / n, 3)  # noqa: E731
    crawler_cpu = sum(cpu.get(r, 0.0) for r in CRAWLER_ROLES)
    served = served or {}
    return {
        "pages": pages["items"],
        "seconds": round(seconds, 2),
        "crawl_seconds": _work_seconds(crawl),
        "pages_per_s": round(pages["items"] / seconds, 1) if seconds else None,
        "pages_per_s_crawl": round(pages["items"] / _work_seconds(crawl), 1) if _work_seconds(crawl) else None,
        "cpu_ms_per_page": per_page(1000 * crawler_cpu),
        "cpu_ms_per_page_by_role": {r: per_page(1000 * v) for r, v in cpu.items()},
        "cpu_s_by_role": {r: round(v, 2) for r, v in cpu.items()},
        "peak_rss_mb": {r: sampler.peak_rss_mb(r) for r in sampler.roles if r != "bench_reads"},
        "rss_at_1k": rss_point(sampler.memory, 1_000),
        "rss_at_100k": rss_point(sampler.memory, 100_000),
        "rss_at_end": rss_point(sampler.memory, None),
        "statements_per_page": per_page(statements["workers"]),
        "statements": statements,
        "redis_commands_per_page": per_page(redis_commands),
        "redis_commands": redis_commands,
        **{k: pages[k] for k in ("completeness", "expected_pages", "pages_found", "missing", "missing_examples")},
        **{k: pages[k] for k in ("extra", "extra_examples", "duplicate_items", "offhost_items")},
        "requests": served.get("requests"),
        "duplicate_requests": served.get("duplicate_requests"),
        "robots_violations": served.get("robots_violations"),
        "robots_txt_requests": served.get("robots_txt_requests"),
        "status": served.get("status"),
        "mode": options.mode,
        "layout": options.layout if options.mode == "distributed" else "embedded",
        "concurrency": options.concurrency,
        "requests_in_flight": options.requests,
        "media": options.media,
        "site": _shown(site_dir),
        "site_pages": truth.get("n_pages"),
        "base_url": server.base_url,
        "server": server.kind,
        "scratch": _shown(scratch.dir),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine_facts(redis_url=scratch.broker_url, postgres_version=postgres_version)
        | {"speed_probe_s": speed_probe_s},  # before and after the crawl (bench/machine.py)
        "crawl": crawl,
    }


def _work_seconds(crawl: dict | None) -> float | None:
    """The crawl's work, from its first fetch to its last finish (the summary's `seconds` includes the
    worker's start; summaries of earlier versions have only that)."""
    crawl = crawl or {}
    return crawl.get("work_seconds", crawl.get("seconds"))


def rss_point(memory: list[dict], discovered: int | None) -> dict | None:
    """Worker RSS when `discovered` URLs were first reached (None: the last reading with workers alive)."""
    alive = [m for m in memory if m["rss_mb"]]
    if discovered is None:  # the last reading with every process still there (not during shutdown)
        most = max((len(m["rss_mb"]) for m in alive), default=0)
        point = next((m for m in reversed(alive) if len(m["rss_mb"]) == most), None)
    else:
        point = next((m for m in alive if (m["discovered"] or 0) >= discovered), None)
    if point is None:
        return None
    values = point["rss_mb"].values()
    return {
        "discovered": point["discovered"],
        "seconds": point["seconds"],
        "max_mb": max(values),
        "sum_mb": round(sum(values), 1),
        "processes_mb": point["rss_mb"],
    }


def _shown(path: Path) -> str:
    """Paths near the repository are shown relative to it (results get pasted into docs)."""
    path = Path(path).resolve()
    if path.is_relative_to(REPO):
        return str(path.relative_to(REPO))
    return f"../{path.relative_to(REPO.parent)}" if path.is_relative_to(REPO.parent) else str(path)


def result_table(result: dict) -> Table:
    r = result
    table = Table(title=f"crawlhub bench: {r['mode']} ({r['layout']}), {r['site']}", show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("pages", f"{r['pages']:,} of {r['expected_pages']:,} expected")
    table.add_row("seconds (crawl process wall time)", f"{r['seconds']:.1f}")
    table.add_row("pages/s", f"{r['pages_per_s']:.1f}")
    table.add_row("pages/s by the crawl command's own clock", _num(r["pages_per_s_crawl"], 1))
    table.add_row("CPU ms/page, crawler total", _num(r["cpu_ms_per_page"], 2))
    for role, value in r["cpu_ms_per_page_by_role"].items():
        note = " (not in the total)" if role not in CRAWLER_ROLES else ""
        table.add_row(f"  {ROLE_NAMES.get(role, role)}{note}", _num(value, 2))
    for role, peak in r["peak_rss_mb"].items():
        if peak["sum"]:
            table.add_row(
                f"peak RSS MB, {ROLE_NAMES.get(role, role)}", f"{peak['sum']:.0f} (largest {peak['max_process']:.0f})"
            )
    for key, label in (("rss_at_1k", "1k"), ("rss_at_100k", "100k"), ("rss_at_end", "end")):
        if r[key]:
            point = r[key]
            table.add_row(
                f"worker RSS MB at {label} ({point['discovered']} URLs)",
                f"max {point['max_mb']:.0f}, sum {point['sum_mb']:.0f}",
            )
    table.add_row("SQL statements/page (workers)", _num(r["statements_per_page"], 2))
    table.add_row("SQL statements, crawl command (polling)", str(r["statements"]["crawl_command"]))
    table.add_row("Redis commands/page (every client of that Redis)", _num(r["redis_commands_per_page"], 2))
    table.add_row("completeness", f"{r['completeness']:.2%} (missing {r['missing']}, extra {r['extra']})")
    table.add_row("duplicate items", str(r["duplicate_items"]))
    table.add_row("requests / duplicate requests", f"{_num(r['requests'])} / {_num(r['duplicate_requests'])}")
    table.add_row("robots violations", _num(r["robots_violations"]))
    probe = r["machine"].get("speed_probe_s")
    if probe:
        table.add_row("machine speed probe, CPU s before / after (lower is faster)", " / ".join(map(str, probe)))
    return table


def _num(value, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def shapes_table(result: dict, top: int = 20) -> Table:
    """The workers' statements by shape (crawlproject/sqlcount.py), most frequent first, per page."""
    n = max(1, result["pages"])
    table = Table(title="SQL statements of the workers by shape, per page", show_header=True)
    table.add_column("per page", justify="right")
    table.add_column("statement (literals as ?)", overflow="fold")
    for shape, count in list(result["statements"].get("shapes", {}).items())[:top]:
        table.add_row(f"{count / n:.3f}", shape)
    return table


def result_print(result: dict, console: Console, *, shapes: bool = False) -> None:
    console.print(result_table(result))
    if shapes:
        console.print(shapes_table(result))
    if result["missing_examples"] or result["extra_examples"]:
        console.print(f"missing e.g. {result['missing_examples']}; extra e.g. {result['extra_examples']}")
