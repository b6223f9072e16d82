"""`make crawl` on the embedded default (SQLite + filesystem broker, workers started by the command)."""

import hashlib
import json
import os
import subprocess
from collections import Counter

import pytest

from bench.check import assert_complete, canon_path
from bench.truth import media_sha256
from tests.conftest import BASE_DIR, last_json_line, migrate_embedded, run_manage

pytestmark = pytest.mark.integration


@pytest.fixture
def embedded_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    return env | {"CRAWLHUB_VAR_DIR": str(tmp_path / "var"), "DJANGO_SETTINGS_MODULE": "crawlproject.settings"}


def test_it_crawls_every_reachable_page_once_with_make_crawl(site, truth, site_server, embedded_env, tmp_path):
    done = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "crawl",
            f"URL={site_server.url}/",
            "ARGS=--allow-private --json --project e2e",
        ],
        cwd=BASE_DIR,
        env=embedded_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = last_json_line(done.stdout)
    assert summary["project"] == "e2e" and summary["completed"] is True
    assert summary["pages_failed"] == len(truth["broken_urls"]) + len(truth["disallowed_urls_linked"])
    assert summary["assets"] == truth["media_count"]
    assert {"pages_fetched", "seconds"} <= summary.keys()

    exported = run_manage(["export", "e2e"], embedded_env)
    rows = [json.loads(line) for line in exported.stdout.splitlines()]
    assert_complete(rows, truth, site_server.paths())
    fetched = Counter(site_server.paths())
    assert [p for p in truth["pages"] if fetched[p] != 1] == [], "a page was fetched more than once"
    _assert_assets_stored(media_sha256(site, truth), embedded_env, tmp_path / "var" / "assets")


def _assert_assets_stored(media: dict, env, media_root):
    exported = run_manage(["export", "e2e", "--what", "assets"], env)
    assets = [json.loads(line) for line in exported.stdout.splitlines()]
    assert {canon_path(a["url"]): a["sha256"] for a in assets} == media
    for asset in assets:
        assert asset["state"] == "done"
        assert hashlib.sha256((media_root / asset["storage_key"]).read_bytes()).hexdigest() == asset["sha256"]


def test_it_records_bad_seeds_as_failed_rows_and_still_completes(site_server, embedded_env):
    migrate_embedded(embedded_env)
    done = run_manage(
        [
            "crawl",
            "http//not a url",
            "ftp://example.com/x",
            f"{site_server.url}/missing/x.html",
            "http://10.255.255.1/",
            "--project",
            "bad",
            "--json",
            "--timeout",
            "120",
        ],
        embedded_env,
    )
    # Every seed refused: each is a failed row saying why, and the command fails, naming the flag.
    assert done.returncode == 1, done.stdout + done.stderr
    assert "nothing could be crawled" in done.stderr and "--allow-private" in done.stderr
    summary = last_json_line(done.stdout)
    assert summary["pages_failed"] == 4 and summary["pages_fetched"] == 0 and summary["state"] == "failed"
    assert summary["errors"] == {"invalid_url": 1, "blocked_scheme": 1, "blocked_address": 2}

    done = run_manage(
        [
            "crawl",
            f"{site_server.url}/error500",
            f"{site_server.url}/data.bin",
            "http://127.0.0.1:1/",
            f"{site_server.url}/missing/y.html",
            "--allow-private",
            "--project",
            "bad2",
            "--json",
            "--timeout",
            "120",
        ],
        embedded_env,
    )
    # /data.bin (application/octet-stream) is stored and done, not parsed: not a failure, so the
    # job, with one page done, succeeds while the three others fail.
    assert done.returncode == 0, done.stdout + done.stderr
    summary = last_json_line(done.stdout)
    assert summary["errors"] == {"http_500": 1, "connect_error": 1, "http_404": 1}
    assert (summary["pages_fetched"], summary["pages_not_parsed"], summary["pages_failed"]) == (1, 1, 3)
    assert summary["state"] == "succeeded"
    assert site_server.paths().count("/error500") == 3, "a 5xx is retried up to CRAWL_MAX_ATTEMPTS times"
