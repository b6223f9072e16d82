"""Fault-injection harness: crawl a generated site in distributed mode while something breaks, then
check the ledger.

Ledger (docs/reliability.md):
  L1 every reachable page has exactly one row, done, or failed with the reason the site intended;
  L2 no two rows for one canonical URL, and the unique constraint that guarantees it exists;
  L3 every stored asset's bytes match its sha256; no orphan objects and no temp files left;
  L4 extra fetches (from the test server's own log) <= kills x the pages one killed process can hold;
  L5 nothing leased or queued at the end: rows, and the broker's stage queues.

`CRAWLHUB_FAULTS=full` (make faults) runs every scenario on a few thousand pages; the default is a
quicker subset on a few hundred, small enough for `make test`.
"""

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
import redis

from bench.check import assert_complete, canon_path
from bench.sitegen import Site
from bench.truth import ground_truth
from crawlproject.queues import QUEUES
from fetch.loop import IN_FLIGHT_BATCHES
from tests.conftest import BASE_DIR, generated_site, last_json_line
from tests.helpers import wait_until
from tests.servers import SiteServer

FULL = os.environ.get("CRAWLHUB_FAULTS", "") == "full"
FETCH_BATCH = 10  # small batches: the pages one killed process can hold, so L4 is a tight bound
HOLDS = FETCH_BATCH * IN_FLIGHT_BATCHES  # the most one process holds: a fetch session's claims in flight
POOL = 2  # processes per worker (celery -c)
full_only = pytest.mark.skipif(not FULL, reason="part of `make faults` (CRAWLHUB_FAULTS=full), not of `make test`")
TIMEOUT = 900 if FULL else 300  # seconds a scenario may take (pytest-timeout)


def site_of(quick: int, full: int) -> Site:
    return generated_site(full if FULL else quick)


@dataclass
class Figures:
    scenario: str
    pages: int = 0
    lost: int = 0
    duplicates: int = 0
    extra_fetches: int = 0
    kills: int = 0
    bound: int = 0
    seconds: float = 0.0


RESULTS: list[Figures] = []


def pool_children(pid: int) -> list[int]:
    """The prefork pool processes of a celery worker (its direct children)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@dataclass
class FaultCrawl:
    """One crawl of `site` by separate stage workers, as a subprocess, with an injected fault."""

    scenario: str
    site: Site
    workers: object
    env: dict
    tmp: Path
    delay: float = 0.0
    project: str = "faults"
    kills: int = 0
    per_kill: int = HOLDS * POOL
    server: SiteServer | None = None
    crawl: subprocess.Popen | None = None
    started: float = 0.0
    extra_env: dict = field(default_factory=dict)
    crawl_workers: int = 0  # processes the crawl command starts itself (embedded mode)

    def __post_init__(self):
        self.truth = ground_truth(self.site)
        var = self.tmp / "var"
        var.mkdir(exist_ok=True)
        self.env = (
            self.env
            | {
                "CRAWLHUB_VAR_DIR": str(var),
                "CRAWL_FETCH_BATCH": str(FETCH_BATCH),
                "CRAWL_DOWNLOAD_BATCH": "5",
            }
            | self.extra_env
        )
        self.workers.env = self.env

    def __enter__(self):
        self.server = SiteServer.generated(self.site, delay=self.delay).__enter__()
        return self

    def __exit__(self, *exc):
        if self.crawl and self.crawl.poll() is None:  # a failed scenario: the crawl and its own workers
            for group in [*pool_children(self.crawl.pid), self.crawl.pid]:  # each worker is a session leader
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signal.SIGKILL)
            self.crawl.wait()
        self.server.__exit__(*exc)

    def start_workers(self, *stages: str) -> None:
        for stage in stages or ("fetch", "extract", "download"):
            self.workers.start(stage, stage, concurrency=POOL)

    def start(self, timeout: float = 600) -> None:
        args = [
            "crawl",
            f"{self.server.url}/",
            "--allow-private",
            "--json",
            "--workers",
            str(self.crawl_workers),
            "--project",
            self.project,
            "--timeout",
            str(timeout),
        ]
        self.started = time.monotonic()
        self.crawl = subprocess.Popen(
            [sys.executable, "manage.py", *args],
            cwd=BASE_DIR,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def done(self) -> int:
        """Pages of the project in state done, read straight from the crawl's database."""
        return count_pages(self.env, self.project, "done")

    def running(self) -> bool:
        return self.crawl.poll() is None

    def wait_for(self, condition, timeout: float = 120) -> None:
        def progressed() -> bool:
            if condition():
                return True
            assert self.running(), "the crawl ended before the fault could be injected: " + self.output()
            return False

        wait_until(progressed, timeout=timeout, what="the crawl to progress")

    def output(self) -> str:
        if self.crawl.poll() is None:
            return ""
        out, err = self.crawl.communicate()
        self._out = (out or "") + (err or "")
        return self._out

    def finish(self, timeout: float = 600) -> dict:
        out, err = self.crawl.communicate(timeout=timeout)
        self.seconds = time.monotonic() - self.started
        assert self.crawl.returncode == 0, f"crawl failed:\n{out}\n{err}"
        self.stdout, self.stderr = out, err
        return last_json_line(out)

    def ledger(self, broker_url: str | None = None) -> Figures:
        """Check L1-L5 and record the scenario's figures for the summary table."""
        done = subprocess.run(
            [sys.executable, "-m", "tests.faults.ledger_report", self.project],
            cwd=BASE_DIR,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        paths = self.server.paths()
        rows = report["pages"]
        done_paths = {canon_path(r["url"]) for r in rows if r["state"] == "done"}
        figures = Figures(
            scenario=self.scenario,
            pages=len(rows),
            lost=len(set(self.truth["pages"]) - done_paths),
            duplicates=report["duplicate_urls"],
            extra_fetches=sum(n - 1 for p, n in Counter(paths).items() if p != "/robots.txt"),
            kills=self.kills,
            bound=self.kills * self.per_kill,
            seconds=round(getattr(self, "seconds", time.monotonic() - self.started), 1),
        )
        RESULTS.append(figures)
        print(f"\n{figures}")
        # L1
        assert_complete(rows, self.truth, paths)
        # L2
        assert report["duplicate_urls"] == 0
        assert report["unique_constraint"], "the (project, url_key) unique constraint is missing"
        # L3
        assets = report["assets"]
        assert assets["by_state"].get("done", 0) == self.truth["media_count"], assets
        assert assets["bad_bytes"] == []
        assert assets["orphans"] == []
        assert assets["temp_files"] == []
        # L4
        assert figures.extra_fetches <= figures.bound, figures
        # L5
        assert set(report["by_state"]) <= {"done", "failed"}, report["by_state"]
        assert set(assets["by_state"]) <= {"done", "failed"}, assets["by_state"]
        assert report["leased_tokens_left"] == 0
        assert_queues_drain(broker_url or self.env.get("CELERY_BROKER_URL", ""), Path(self.env["CRAWLHUB_VAR_DIR"]))
        return figures


def count_pages(env: dict, project: str, state: str) -> int:
    sql = (
        "SELECT count(*) FROM crawl_page p JOIN crawl_project pr ON pr.id = p.project_id "
        "WHERE pr.slug = {0} AND p.state = {0}"
    )
    url = env.get("DATABASE_URL", "")
    try:
        if url.startswith("postgres"):
            with psycopg.connect(url, connect_timeout=3) as conn:
                return conn.execute(sql.format("%s"), (project, state)).fetchone()[0]
        db = Path(env["CRAWLHUB_VAR_DIR"]) / "db.sqlite3"
        with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn:
            return conn.execute(sql.format("?"), (project, state)).fetchone()[0]
    except (psycopg.OperationalError, sqlite3.OperationalError):
        return 0  # the database is down (a fault under test) or not created yet


def assert_queues_drain(broker_url: str, var_dir: Path | None = None, timeout: float = 30) -> None:
    """The stage queues empty out: duplicate or replayed messages left in them are consumed (as no-ops).
    Redis: the queues' lists; the embedded filesystem broker: its message files."""

    def lengths() -> dict[str, int]:
        if broker_url.startswith("redis"):
            with contextlib.closing(redis.Redis.from_url(broker_url)) as client:
                return {q: client.llen(q) for q in ("fetch", "extract", "download")}
        return {"files": sum(1 for _ in (var_dir / "broker" / "data").glob("*.msg"))}

    wait_until(lambda: not any(lengths().values()), timeout=timeout, interval=0.5, what=lambda: f"{lengths()} to drain")


def assert_tasks_finish(broker_url: str, timeout: float = 60) -> None:
    """Every message the workers took has its task finished: none is left in the queues, nor in
    Redis's unacked hash, which holds a delivered message until its task ends (acks_late)."""

    def owed() -> dict[str, int]:
        with contextlib.closing(redis.Redis.from_url(broker_url)) as client:
            return {q: client.llen(q) for q in QUEUES} | {"unacked": client.hlen("unacked")}

    wait_until(lambda: not any(owed().values()), timeout=timeout, interval=0.2, what=lambda: f"{owed()} to finish")


def sigkill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False
