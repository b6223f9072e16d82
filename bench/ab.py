"""Before and after in one run: the bench's scenarios, run in turn by an earlier commit's code and by
this checkout's, so that a change's cost is measured against the same machine at the same time.

    python -m bench.ab REF [--rounds 2] [--modes distributed,distributed-per-queue,embedded]
                           [--broad 100x31,1000x10] [--no-scrapy]

REF (a commit, tag or branch) is checked out as a git worktree under var/bench/ab/<commit>/crawlhub,
with the shared bench linked beside it when there is one, and run with this checkout's Python. Each
scenario runs REF then this checkout, then this checkout then REF on the next round (ABBA), each in
its own scratch state (bench.compare and bench.broad of its own tree), so a drift of the machine
during the run weighs on both. The peers (Scrapy on the single site, the broad peer) run once per
scenario, in the same run, for scale. The table goes to stdout and var/bench/ab.md, every figure to
var/bench/ab.json. A figure is pages/s for the single site (higher is better) and the wall seconds
of the server's log for a broad crawl (lower is better); "after/before" is the ratio of the medians,
as speed (above 1.00: this checkout is faster).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import REPO, BenchError

AB_DIR = REPO / "var" / "bench" / "ab"
SHARED = REPO.parent / "shared"


def tree_of(ref: str) -> Path:
    """REF's worktree (made on first use): var/bench/ab/<commit>/crawlhub, the shared bench beside it."""
    commit = _git("rev-parse", "--verify", f"{ref}^{{commit}}").strip()
    tree = AB_DIR / commit[:12] / "crawlhub"
    if not (tree / "manage.py").exists():
        tree.parent.mkdir(parents=True, exist_ok=True)
        _git("worktree", "add", "--detach", str(tree), commit)
    if SHARED.is_dir() and not (tree.parent / "shared").exists():
        (tree.parent / "shared").symlink_to(SHARED, target_is_directory=True)
    return tree


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _env() -> dict:
    """Each tree keeps its own var/ (no CRAWLHUB_VAR_DIR from here) on the configured services."""
    from bench.compare import _distributed_env

    return {k: v for k, v in _distributed_env().items() if k not in ("CRAWLHUB_VAR_DIR", "DJANGO_SETTINGS_MODULE")}


def _run(tree: Path, args: list[str], result: str) -> dict:
    command = [sys.executable, "-m", *args]
    print(f"$ ({tree.relative_to(REPO) if tree != REPO else '.'}) {' '.join(command[1:])}", file=sys.stderr, flush=True)
    done = subprocess.run(command, cwd=tree, env=_env(), stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise BenchError(f"{' '.join(args)} failed in {tree} ({done.returncode}):\n{done.stdout[-2000:]}")
    return json.loads((tree / "var" / "bench" / result).read_text())


def single(tree: Path, mode: str) -> dict:
    row = _run(tree, ["bench.compare", "--modes", mode, "--no-scrapy"], "latest.json")["crawlhub"][mode]
    return {
        "value": row["pages_per_s"],
        "complete": row["completeness"],
        "cpu_ms": row.get("cpu_ms_per_page"),
        "cpu_ms_by_role": row.get("cpu_ms_per_page_by_role"),
        "statements_per_page": row.get("statements_per_page"),
    }


def broad(tree: Path, hosts: int, pages: int, mode: str) -> dict:
    args = ["bench.broad", "--hosts", str(hosts), "--pages", str(pages), "--modes", mode, "--no-scrapy"]
    row = _run(tree, args, f"broad-{hosts}x{pages}.json")["rows"][f"crawlhub {mode}"]
    return {"value": row["span_s"], "complete": row["completeness"], "min_gap_s": row["min_gap_s"]}


def speedup(before: list[float], after: list[float], *, higher_is_better: bool) -> float:
    """after's speed over before's, from the medians: pages/s divide one way, seconds the other."""
    b, a = statistics.median(before), statistics.median(after)
    return a / b if higher_is_better else b / a


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ref", help="the earlier commit (before)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each side per scenario (default 2, ABBA)")
    parser.add_argument("--modes", default="distributed,distributed-per-queue,embedded", help="single-site modes")
    parser.add_argument("--broad", default="100x31,1000x10", help="broad scenarios HOSTSxPAGES ('' for none)")
    parser.add_argument("--broad-modes", default="embedded,distributed")
    parser.add_argument("--no-scrapy", action="store_true", help="skip the peers")
    args = parser.parse_args(argv)
    trees = {"before": tree_of(args.ref), "after": REPO}
    scenarios = [("single", mode, lambda t, m=mode: single(t, m), True) for mode in args.modes.split(",") if mode]
    for size in filter(None, args.broad.split(",")):
        hosts, pages = (int(n) for n in size.split("x"))
        for mode in args.broad_modes.split(","):
            run = lambda t, h=hosts, p=pages, m=mode: broad(t, h, p, m)  # noqa: E731
            scenarios.append((f"broad {size}", mode, run, False))
    results = []
    for scenario, mode, run, higher in scenarios:
        runs = {"before": [], "after": []}
        for n in range(args.rounds):
            for side in ("before", "after") if n % 2 == 0 else ("after", "before"):
                runs[side].append(run(trees[side]))
        results.append({"scenario": scenario, "mode": mode, "higher_is_better": higher, **runs})
    peers = {} if args.no_scrapy else _peers(args)
    text = markdown(args.ref, results, peers)
    print(text)
    AB_DIR.mkdir(parents=True, exist_ok=True)
    (AB_DIR.parent / "ab.md").write_text(text + "\n")
    record = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "ref": args.ref, "results": results}
    (AB_DIR.parent / "ab.json").write_text(json.dumps(record | {"peers": peers}, indent=1) + "\n")
    return 0


def _peers(args) -> dict:
    """The peers once per scenario, in this run: Scrapy's pages/s on the site, the broad peer's seconds."""
    peers = {}
    if args.modes and (REPO.parent / "shared" / "bench").is_dir():
        from bench.compare import _scrapy

        peers["single"] = _scrapy()["pages_per_s"]  # run_scrapy.sh serves the site itself
    for size in filter(None, args.broad.split(",")):
        hosts, pages = size.split("x")
        record = _run(REPO, ["bench.broad", "--hosts", hosts, "--pages", pages, "--modes", ""], f"broad-{size}.json")
        if "scrapy" in record["rows"]:
            peers[f"broad {size}"] = record["rows"]["scrapy"]["span_s"]
    return peers


def markdown(ref: str, results: list[dict], peers: dict) -> str:
    lines = [
        f"Before ({ref}) and after (this checkout), in turn, same machine, same run "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}).",
        "",
        "| scenario | mode | before | after | after/before speed | CPU ms/page, before -> after | peer |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for r in results:
        unit = "pages/s" if r["higher_is_better"] else "s"
        before, after = ([x["value"] for x in r[side]] for side in ("before", "after"))
        ratio = speedup(before, after, higher_is_better=r["higher_is_better"])
        peer = peers.get(r["scenario"])
        lines.append(
            f"| {r['scenario']} | {r['mode']} | {_shown(before, unit)} | {_shown(after, unit)} | {ratio:.2f} "
            f"| {_cpu(r)} | {'–' if peer is None else f'{peer:g} {unit}'} |"
        )
    incomplete = [r for r in results for side in ("before", "after") for x in r[side] if x["complete"] < 1]
    if incomplete:
        lines += ["", f"Incomplete runs: {len(incomplete)} (see the JSON)."]
    return "\n".join(lines)


def _cpu(result: dict) -> str:
    """The medians of CPU ms per page (all the crawl's processes), where the scenario measures it."""
    sides = [[x["cpu_ms"] for x in result[side] if x.get("cpu_ms") is not None] for side in ("before", "after")]
    if not all(sides):
        return "–"
    before, after = (statistics.median(values) for values in sides)
    return f"{before:.2f} -> {after:.2f}"


def _shown(values: list[float], unit: str) -> str:
    return ", ".join(f"{v:g}" for v in values) + f" {unit}"


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crawlproject.settings")
    sys.exit(main())
