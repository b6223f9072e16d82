"""Fault suite, scenario 7: 200 hub pages linking to the same 1,000 URLs, extracted by two workers
at once, make exactly 1,000 rows, without an IntegrityError anywhere (inserts are ON CONFLICT)."""

import time
from collections import Counter
from pathlib import Path

import pytest

from crawl.models import Page
from tests.conftest import last_json_line, run_manage
from tests.faults.harness import FULL, RESULTS, TIMEOUT, Figures
from tests.servers import Site, SiteServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(TIMEOUT)]
HTML = {"Content-Type": "text/html; charset=utf-8"}
HUBS, SHARED = (200, 1000) if FULL else (60, 400)  # the figures under make faults


def shared_links_site() -> Site:
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    site.files["/"] = (200, HTML, "".join(f'<a href="/hub/{h}">h</a>' for h in range(HUBS)).encode())
    links = "".join(f'<a href="/item/{i}">i</a>' for i in range(SHARED)).encode()
    for h in range(HUBS):
        site.files[f"/hub/{h}"] = (200, HTML, links)
    for i in range(SHARED):
        site.files[f"/item/{i}"] = (200, HTML, b"<html><body>item</body></html>")
    return site


def test_hubs_sharing_links_make_each_row_once(workers, worker_env, tmp_path):
    env = worker_env | {"CRAWL_EXTRACT_BATCH": "5"}  # many small extract batches racing on the same URLs
    workers.env = env
    for name, queue in (
        ("fetch", "fetch"),
        ("extract-a", "extract"),
        ("extract-b", "extract"),
        ("download", "download"),
    ):
        workers.start(name, queue)
    started = time.monotonic()
    with SiteServer(shared_links_site()) as server:
        done = run_manage(
            [
                "crawl",
                f"{server.url}/",
                "--allow-private",
                "--workers",
                "0",
                "--json",
                "--project",
                "shared",
                "--timeout",
                "240",
            ],
            env,
            timeout=300,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = last_json_line(done.stdout)
    items = Page.objects.filter(project__slug="shared", url__contains="/item/")
    urls = list(Page.objects.filter(project__slug="shared").values_list("url", flat=True))
    RESULTS.append(
        Figures(
            scenario=f"7 {HUBS} hubs share {SHARED} links, 2 extractors",
            pages=len(urls),
            lost=SHARED - items.filter(state="done").count(),
            duplicates=len(urls) - len(set(urls)),
            extra_fetches=sum(n - 1 for p, n in Counter(server.paths()).items() if p != "/robots.txt"),
            seconds=round(time.monotonic() - started, 1),
        )
    )
    print(
        f"\nshared links: {items.count()} item rows, {summary['pages_fetched']} pages done, "
        f"{summary['pages_failed']} failed"
    )
    assert items.count() == SHARED
    assert RESULTS[-1].extra_fetches == 0
    assert summary["pages_failed"] == 0
    assert summary["pages_fetched"] == 1 + HUBS + SHARED
    extractors = set(Page.objects.filter(project__slug="shared").values_list("extracted_by", flat=True))
    assert {e.split("@")[0] for e in extractors if e} == {"extract-a", "extract-b"}
    logs = "".join(p.read_text(errors="replace") for p in Path(tmp_path).glob("*.log"))
    assert "IntegrityError" not in logs
    assert "deadlock" not in logs.lower()
