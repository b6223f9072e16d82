"""What block detection costs per page in pure CPU: core.blocks.block_verdict over the bench's own
site (bench.sitegen, in memory), timed with time.process_time, for each kind of project rules:

  built-in     the shipped rules alone (every project's default)
  own-regex    the built-in rules and a user's status + regex rule and a title rule
  selector     the built-in rules and a user's CSS selector rule (the one rule that parses)

    python -m bench.micro_blocks                      # 1,000 pages, best of 5 repetitions
    python -m bench.micro_blocks --pages 300 --json
"""

import argparse
import json
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: this checkout, after PYTHONPATH (another checkout wins)
    sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.sitegen import page_html, site_plan
from core.blocks import block_rules, block_verdict
from core.net.client import FetchResponse

BASE_URL = "http://127.0.0.1:18090"
HEADERS = {"content-type": "text/html; charset=utf-8"}
RULES = {
    "built-in": [],
    "own-regex": [{"status": 200, "regex": "(?i)you have been rate limited"}, {"title": "(?i)^sorry"}],
    "selector": [{"name": "login wall", "selector": "form#login"}],
}


def responses(n: int, seed: int) -> list[FetchResponse]:
    site = site_plan(n=n, seed=seed, base_url=BASE_URL)
    return [
        FetchResponse(url=BASE_URL + spec.path, status_code=200, headers=HEADERS, body=page_html(spec).encode())
        for spec in site.pages
    ]


def one_pass(rules, batch: list[FetchResponse]) -> tuple[float, int]:
    """CPU seconds over the batch, and the pages classed blocked (0 on this site)."""
    blocked = 0
    start = time.process_time()
    for response in batch:
        blocked += block_verdict(rules, response, usual_length=None) is not None
    return time.process_time() - start, blocked


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    batch = responses(args.pages, args.seed)
    mean_bytes = sum(len(r.body) for r in batch) / len(batch)
    figures = {"pages": len(batch), "mean_page_bytes": round(mean_bytes)}
    for name, specs in RULES.items():
        rules = block_rules(specs)
        runs = [one_pass(rules, batch) for _ in range(args.repeat)]
        best = min(seconds for seconds, _ in runs)
        figures[name] = {"us_per_page": round(1e6 * best / len(batch), 1), "blocked": runs[0][1]}
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"{figures['pages']} pages of about {figures['mean_page_bytes']} bytes, best of {args.repeat}:")
        for name in RULES:
            print(f"  {name:10} {figures[name]['us_per_page']:8.1f} us per page ({figures[name]['blocked']} blocked)")
    return figures


if __name__ == "__main__":
    main()
