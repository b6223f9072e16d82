"""What the extract stage costs per page in pure CPU, without the database or the broker.

Pages come from bench.sitegen (the bench's own site, in memory). Each part is what the extract
stage does to every HTML page before it writes, timed with time.process_time:

  extract      scrape.extractors.extract_html (parse, links, media, metadata, visible text)
  fingerprint  scrape.fingerprint.fingerprints of the visible text (text hash and simhash)
  discover     per link, what discovery does before its INSERT: the raw KnownKeys entry, the
               canonical URL, its url_key, the scope check and the KnownKeys lookups; each page's
               in-scope links are then known, as after its commit (every repetition starts cold)
  clean        scrape.services._jsonb_safe of the page item (every link and the text) and changes

    python -m bench.micro_extract                      # 1,000 pages, best of 5 repetitions
    python -m bench.micro_extract --pages 300 --profile  # and cProfile's top functions of one pass
"""

import argparse
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path
from types import SimpleNamespace

if __package__ in (None, ""):  # run as a file: this checkout, after PYTHONPATH (another checkout wins)
    sys.path.append(str(Path(__file__).resolve().parent.parent))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crawlproject.settings")
import django  # the discovery and service modules import models: set up, never connected

django.setup()

from bench.sitegen import page_html, site_plan  # noqa: E402
from core.canonical import Scope  # noqa: E402
from crawl.frontier import discovery  # noqa: E402
from crawl.frontier.known_urls import KnownKeys  # noqa: E402
from crawl.frontier.verdicts import Link  # noqa: E402
from scrape import extractors  # noqa: E402
from scrape.extraction import _fingerprints, _page_item  # noqa: E402
from scrape.services import _jsonb_safe  # noqa: E402

BASE_URL = "http://127.0.0.1:18090"
PARTS = ("extract", "fingerprint", "discover", "clean")
PROJECT_ID = 1


def pages(n: int, seed: int) -> list[tuple[str, bytes]]:
    """(URL, body) of the site's first n pages."""
    site = site_plan(n=n, seed=seed, base_url=BASE_URL)
    return [(BASE_URL + spec.path, page_html(spec).encode()) for spec in site.pages]


def discover(urls: list[str], scope: Scope) -> None:
    """pages_discover's work per link up to its query, then what its commit makes known."""
    known, learned = discovery.known_keys, []
    for url in urls:
        raw_packed, canonical, key = discovery._link_of(PROJECT_ID, Link(url, 1))
        if canonical is None or scope.rejects(canonical, 1):
            continue
        packed = known.pack(PROJECT_ID, key)
        if packed not in known:
            learned += [packed, raw_packed]
    known.add_all(learned)


def one_pass(batch: list[tuple[str, bytes]], scope: Scope) -> dict[str, float]:
    """CPU seconds of each part over the whole batch, from a process that knows no URL yet."""
    discovery.known_keys = KnownKeys()
    spent = dict.fromkeys(PARTS, 0.0)
    for url, body in batch:
        t0 = time.process_time()
        extraction = extractors.extract_html(body, url)
        t1 = time.process_time()
        changes = _fingerprints(extraction.text)
        t2 = time.process_time()
        discover([link.url for link in extraction.links], scope)
        t3 = time.process_time()
        _jsonb_safe(_page_item(SimpleNamespace(url=url), extraction, body, False))
        _jsonb_safe(changes)
        t4 = time.process_time()
        for part, seconds in zip(PARTS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            spent[part] += seconds
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--repeat", type=int, default=5, help="repetitions; the best of each part is printed")
    parser.add_argument("--profile", action="store_true", help="also print cProfile's top 25 of one pass")
    args = parser.parse_args()
    batch = pages(args.pages, args.seed)
    scope = Scope.build(domains=["127.0.0.1"])
    best = dict.fromkeys(PARTS, float("inf"))
    for _ in range(args.repeat):
        for part, seconds in one_pass(batch, scope).items():
            best[part] = min(best[part], seconds)
    links = sum(body.count(b"<a href") for _, body in batch) / len(batch)
    print(f"{len(batch)} pages, {links:.1f} <a href> a page; CPU ms a page, best of {args.repeat}:")
    for part in PARTS:
        print(f"  {part:<12} {1000 * best[part] / len(batch):7.3f}")
    print(f"  {'total':<12} {1000 * sum(best.values()) / len(batch):7.3f}")
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(one_pass, batch, scope)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
