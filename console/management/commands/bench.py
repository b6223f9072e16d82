"""python manage.py bench: crawl a local benchmark site and print throughput, CPU, memory, SQL and
broker figures, and completeness against the site's ground truth (see bench/README.md)."""

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from rich.console import Console

from bench import BenchError
from bench.report import result_print
from bench.run import BenchOptions, bench_run
from bench.workers import LAYOUTS


class Command(BaseCommand):
    help = "Benchmark a crawl of a deterministic local site (like `scrapy bench`), embedded or distributed."

    def add_arguments(self, parser):
        parser.add_argument("--pages", type=int, default=10_000, help="content pages of the generated site")
        parser.add_argument("--seed", type=int, default=20240601, help="the generated site's random seed")
        parser.add_argument("--mode", choices=("embedded", "distributed"), default="embedded")
        parser.add_argument("--layout", choices=LAYOUTS, default="one", help="distributed: workers (bench/workers.py)")
        parser.add_argument("--concurrency", type=int, default=2, help="worker pool processes (default 2)")
        parser.add_argument(
            "--media", action=argparse.BooleanOptionalAction, default=False, help="download media (default: no)"
        )
        parser.add_argument(
            "--requests",
            type=int,
            default=32,
            help="requests in flight to the site at once, all workers (the project's max_per_host; each fetch "
            "batch may have its share, N / --concurrency, in flight; default 32)",
        )
        parser.add_argument("--site", type=Path, help="a site folder: site/, ground_truth.json, redirects.map")
        parser.add_argument("--base-url", help="use this running server instead of starting one")
        parser.add_argument("--access-log", type=Path, help="that server's access log (bench log format)")
        parser.add_argument("--port", type=int, default=18090, help="port of the generated site (default 18090)")
        parser.add_argument("--timeout", type=float, default=3600, help="give the crawl up after N seconds")
        parser.add_argument("--json", action="store_true", help="print every figure as one JSON line last")
        parser.add_argument(
            "--shapes", action="store_true", help="also print the workers' SQL statements by shape, per page"
        )

    def handle(self, *args, **opts):
        options = BenchOptions(**{f.name: opts[f.name] for f in fields(BenchOptions)})  # one option each
        if options.pages < 1 or options.concurrency < 1 or not 1 <= options.requests <= 1000:
            raise CommandError("--pages and --concurrency must be at least 1, --requests from 1 to 1000")
        say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
        try:
            result = bench_run(options, say=say)
        except BenchError as exc:
            raise CommandError(str(exc)) from None
        result_print(result, Console(file=self.stdout._out, width=110), shapes=opts["shapes"])
        self.stdout.write(
            f"{result['pages']} pages in {result['seconds']:.1f} s: {result['pages_per_s']} pages/s, "
            f"{result['cpu_ms_per_page']} CPU ms/page, completeness {result['completeness']:.2%}"
        )
        if opts["json"]:
            self.stdout.write(json.dumps(result))
