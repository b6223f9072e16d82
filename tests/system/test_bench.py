"""The benchmark (bench/): the site generator, the checker, the fallback server, SQL counting, and
`manage.py bench` end to end in both modes on a 300-page site."""

import hashlib
import json
import os
import subprocess
import sys
from collections import deque
from pathlib import Path
from urllib.parse import urljoin, urlsplit
from urllib.robotparser import RobotFileParser

import httpx
import lxml.html
import psycopg
import pytest
from psycopg import sql

from bench.check import access_log_report, canon_path, pages_report, parse_log_line
from bench.compare import markdown
from bench.serving import site_serve
from bench.sitefiles import read_redirects, site_ensure
from crawlproject.sqlcount import StatementCounter
from tests.conftest import BASE_DIR, last_json_line
from tests.helpers import free_port

BASE = "http://127.0.0.1:18090"


def _digest(root: Path) -> str:
    sha = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        sha.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return sha.hexdigest()


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory) -> Path:
    root, _ = site_ensure(n=300, seed=7, base_url=BASE, parent=tmp_path_factory.mktemp("sites"))
    return root


def test_it_generates_byte_identical_sites_for_the_same_arguments(site_dir, tmp_path):
    again, reused = site_ensure(n=300, seed=7, base_url=BASE, parent=tmp_path / "a")
    other, _ = site_ensure(n=300, seed=8, base_url=BASE, parent=tmp_path / "b")
    assert reused is False
    assert _digest(again) == _digest(site_dir)
    assert _digest(other) != _digest(site_dir)


def test_it_reuses_a_generation_whose_stamp_matches(site_dir):
    root, reused = site_ensure(n=300, seed=7, base_url=BASE, parent=site_dir.parent)
    assert (root, reused) == (site_dir, True)


def _bfs_over_html(root: Path, base: str) -> set[str]:
    """What a polite crawler finds from / in the written files: robots.txt, the 301 map and 404s applied."""
    robots = RobotFileParser()
    robots.parse((root / "site" / "robots.txt").read_text().splitlines())
    redirects, host = read_redirects(root / "redirects.map"), urlsplit(base).netloc
    found, queue = {"/"}, deque(["/"])
    while queue:
        current = queue.popleft()
        file = root / "site" / (urlsplit(current).path.lstrip("/") or "index.html")
        for href in lxml.html.fromstring(file.read_bytes()).xpath("//a/@href"):
            url = urljoin(base + current, href)
            if urlsplit(url).scheme not in ("http", "https") or urlsplit(url).netloc != host:
                continue
            target = _follow(canon_path(url), redirects)
            if not target or target in found or not robots.can_fetch("*", base + target):
                continue
            if (root / "site" / urlsplit(target).path.lstrip("/")).is_file():
                found.add(target)
                queue.append(target)
    return found


def _follow(target: str, redirects: dict) -> str | None:
    path, _, query = target.partition("?")
    hops = set()
    while path in redirects:
        if path in hops:
            return None  # a loop
        hops.add(path)
        path = redirects[path]
    return path + (f"?{query}" if query else "")


def test_every_ground_truth_page_is_reachable_from_the_home_page(site_dir):
    truth = json.loads((site_dir / "ground_truth.json").read_text())
    assert _bfs_over_html(site_dir, truth["params"]["base_url"]) == set(truth["pages"])
    assert truth["n_pages"] == 306 and truth["n_query_variant_urls"] == 6
    assert truth["redirects"] and truth["redirect_loops"] and truth["broken_urls"] and truth["disallowed_urls_linked"]
    assert truth["external_urls_linked"] > 0 and truth["media"]["images"] and truth["media"]["videos"]
    assert not any(p.startswith("/private/") for p in truth["pages"])


def test_it_canonicalises_like_the_shared_checker():
    assert canon_path("http://h:1/s01/./p1.html#top") == "/s01/p1.html"
    assert canon_path("/s02/../s01/p1.html?view=print&lang=en") == "/s01/p1.html?lang=en&view=print"
    assert canon_path("http://h:1") == "/"


TRUTH = {
    "params": {"base_url": "http://127.0.0.1:9"},
    "pages": ["/", "/a.html", "/b.html?lang=en&view=print"],
    "robots_disallow": ["/private/"],
}


def test_it_reports_missing_extra_and_duplicate_pages():
    urls = ["http://127.0.0.1:9/", "http://127.0.0.1:9/a.html#x", "http://127.0.0.1:9/./a.html"]
    urls += ["http://127.0.0.1:9/c.html", "http://elsewhere.invalid/b.html"]
    report = pages_report(TRUTH, urls)
    assert report["completeness"] == round(2 / 3, 6)
    assert (report["missing"], report["missing_examples"]) == (1, ["/b.html?lang=en&view=print"])
    assert (report["extra"], report["duplicate_items"], report["offhost_items"]) == (1, 1, 1)


def test_it_counts_requests_duplicates_and_robots_violations_from_the_access_log():
    lines = [
        '1700000000.100 200 GET "/" 100 0.000 "ua"',
        '1700000000.200 200 GET "/b.html?view=print&lang=en" 100 0.000 "ua"',
        '1700000000.300 200 GET "/b.html?lang=en&view=print" 100 0.000 "ua"',
        '1700000000.400 200 GET "/private/q1.html" 10 0.000 "ua"',
        '1700000001.500 404 GET "/robots.txt" 0 0.000 "ua"',
        "garbage",
    ]
    report = access_log_report(TRUTH, lines)
    assert report["requests"] == 5 and report["status"] == {"200": 4, "404": 1}
    assert report["duplicate_requests"] == 1 and report["robots_violations"] == 1
    assert report["first_to_last_request_s"] == 1.4 and parse_log_line("garbage") is None


def test_it_counts_statements_and_writes_them_per_process(tmp_path):
    counter = StatementCounter(tmp_path)
    for _ in range(3):
        counter(lambda sql, params, many, context: None, "SELECT 1", (), False, {})
    counter.write()
    record = json.loads((tmp_path / f"{os.getpid()}.json").read_text())
    assert (record["pid"], record["statements"]) == (os.getpid(), 3)


@pytest.mark.integration
def test_the_fallback_server_answers_like_the_nginx_config(site_dir, tmp_path):
    server = site_serve(
        web_root=site_dir / "site",
        redirects=site_dir / "redirects.map",
        port=free_port(),
        scratch=tmp_path,
        prefer_nginx=False,
    )
    try:
        with httpx.Client(base_url=server.base_url) as client:
            assert client.get("/").status_code == 200
            assert client.get("/go/chain-r00").headers["location"] == "/go/r00"
            assert client.get("/missing/m00.html").status_code == 404
            assert client.get("/robots.txt").text.startswith("User-agent: *")
    finally:
        lines = server.log_lines()
    assert [parse_log_line(line)[1] for line in lines] == ["200", "301", "404", "200"]


def _bench(args: list[str], env: dict) -> dict:
    done = subprocess.run(
        [sys.executable, "manage.py", "bench", "--pages", "300", "--port", str(free_port()), "--json", *args],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return last_json_line(done.stdout)


def _assert_complete(result: dict) -> None:
    assert result["completeness"] == 1.0 and result["pages"] > 300
    assert result["duplicate_items"] == 0 and result["duplicate_requests"] == 0 and result["robots_violations"] == 0
    assert result["statements_per_page"] > 0 and result["cpu_ms_per_page"] > 0


@pytest.fixture
def bench_env(tmp_path) -> dict:
    return {**os.environ, "CRAWLHUB_VAR_DIR": str(tmp_path / "var"), "DJANGO_SETTINGS_MODULE": "crawlproject.settings"}


@pytest.mark.integration
def test_it_benches_an_embedded_crawl(bench_env):
    result = _bench(["--mode", "embedded"], bench_env)
    _assert_complete(result)
    assert result["mode"] == "embedded" and result["redis_commands_per_page"] is None


@pytest.fixture
def scratch_database():
    """The distributed bench's `<name>_bench` database, dropped afterwards (a run leaves it to inspect)."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    yield
    with psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname="postgres", autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(f"{db['NAME']}_bench")))


@pytest.mark.integration
@pytest.mark.usefixtures("scratch_database")
def test_it_benches_a_distributed_crawl(bench_env, broker):
    result = _bench(["--mode", "distributed"], bench_env | {"CELERY_BROKER_URL": broker})
    _assert_complete(result)
    assert result["redis_commands_per_page"] > 0 and result["cpu_s_by_role"]["postgres"] > 0
    assert result["cpu_s_by_role"]["workers"] > 0 and result["layout"] == "one"


def _row(pages_per_s: float, cpu: float) -> dict:
    return {
        "pages_per_s": pages_per_s,
        "cpu_ms_per_page": cpu,
        "statements_per_page": 1.5,
        "redis_commands_per_page": None,
        "peak_rss_mb": {"crawl_command": {"sum": 100}, "workers": {"sum": 300}},
        "completeness": 1.0,
        "duplicate_items": 0,
        "duplicate_requests": 0,
        "robots_violations": 0,
        "rss_at_1k": None,
        "rss_at_100k": None,
        "date": "2026-01-01T00:00:00Z",
        "site": "s",
        "site_pages": 10200,
        "machine": {"cores": 2, "cpu": "x", "python": "3.11.7"},
    }


def test_it_prints_the_ratio_table_and_the_targets():
    peer = {"pages_per_s": 237.0, "cpu_ms_per_page": 4.21, "max_rss_mb": 117.0, "completeness": 1.0}
    peer |= {"duplicate_items": 0, "duplicate_requests": 0, "robots_violations": 0}
    text = markdown({"distributed": _row(500.0, 2.5), "embedded": _row(200.0, 4.0)}, peer)
    assert "| crawlhub distributed | 500 | 2.11 | 2.50 | 1.50 | – | 400 | 100.00% | 0 | 0 | 0 |" in text
    assert "| distributed ≥ 2× Scrapy's pages/s | 2.11× | yes |" in text
    assert "| embedded ≥ 1× Scrapy's pages/s | 0.84× | **no** |" in text
    assert "| embedded: ≤ 3 CPU ms/page | 4.00 | **no** |" in text
