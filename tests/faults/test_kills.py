"""Fault suite, scenarios 1, 2, 3 and 8: workers killed, shut down warm, and paused past their lease."""

import os
import signal
import time
from pathlib import Path

import pytest

from tests.faults.harness import (
    HOLDS,
    POOL,
    TIMEOUT,
    FaultCrawl,
    count_pages,
    full_only,
    pool_children,
    sigkill,
    site_of,
)
from tests.helpers import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(TIMEOUT)]


@full_only
def test_1_a_fetch_pool_child_killed_every_2_seconds_loses_nothing(workers, worker_env, tmp_path):
    site = site_of(quick=150, full=3000)
    with FaultCrawl("1 SIGKILL a fetch pool child every 2 s", site, workers, worker_env, tmp_path, delay=0.02) as run:
        run.per_kill = HOLDS  # one pool child: a fetch session's claims in flight
        run.start_workers()
        run.start()
        run.wait_for(lambda: run.done() >= 20)
        fetch = workers.procs["fetch"].pid
        while run.running():
            children = pool_children(fetch)
            if children and sigkill(children[-1]):
                run.kills += 1
            time.sleep(2)
        run.finish()
        figures = run.ledger()
    assert figures.kills >= 3


@full_only
def test_2_a_whole_worker_killed_every_20_seconds_and_restarted_loses_nothing(workers, worker_env, tmp_path):
    site = site_of(quick=300, full=3000)
    scenario = "2 SIGKILL a whole worker every 20 s, restart"
    with FaultCrawl(scenario, site, workers, worker_env, tmp_path, delay=0.05) as run:
        run.per_kill = HOLDS * POOL  # every process of the worker
        run.start_workers()
        run.start()
        stages = ["fetch", "extract", "download"]
        while run.running():
            deadline = time.monotonic() + 20
            while run.running() and time.monotonic() < deadline:
                time.sleep(0.5)
            if not run.running():
                break
            stage = stages[run.kills % len(stages)]
            name = next(n for n in workers.procs if n.startswith(stage))
            workers.kill(name)  # SIGKILL the process group: main process and pool children
            run.kills += 1
            workers.start(f"{stage}-{run.kills}", stage, concurrency=POOL)
        run.finish()
        figures = run.ledger()
    assert figures.kills >= 1


@full_only
def test_3_a_warm_shutdown_finishes_the_running_task_without_redelivery(workers, worker_env, tmp_path):
    site = site_of(quick=100, full=2000)
    scenario = "3 SIGTERM (warm shutdown) mid-task"
    with FaultCrawl(scenario, site, workers, worker_env, tmp_path, delay=0.3) as run:
        run.start_workers()
        run.start()
        run.wait_for(lambda: run.done() >= 5 and count_pages(run.env, run.project, "leased") > 0)
        fetch = workers.procs.pop("fetch")
        fetch.terminate()  # the main process: it stops consuming and waits for its tasks
        fetch.process.wait(120)
        log = (Path(tmp_path) / "fetch.log").read_text(errors="replace")
        assert "succeeded" in log.rsplit("Warm shutdown", 1)[-1], "no task finished after the warm shutdown began"
        workers.start("fetch-2", "fetch", concurrency=POOL)
        run.finish()
        figures = run.ledger()
    assert figures.extra_fetches == 0, "a task was redelivered or a page fetched twice"


@full_only
def test_8_a_worker_paused_past_its_lease_has_its_late_write_rejected(workers, worker_env, tmp_path):
    site = site_of(quick=60, full=1000)
    scenario = "8 SIGSTOP past the lease, SIGCONT after"
    with FaultCrawl(scenario, site, workers, worker_env, tmp_path, delay=0.2) as run:
        run.start_workers("extract", "download")
        workers.start("fetch-a", "fetch", concurrency=1)
        run.start()
        # Paused with a request out, so that fetch-b fetches that page again (a worker paused between
        # its claim and its first request sends nothing: its late write is still rejected).
        page_requested = lambda: any(p != "/robots.txt" for p in run.server.paths())  # noqa: E731
        run.wait_for(lambda: page_requested() and count_pages(run.env, run.project, "leased") > 0)
        zombie = workers.procs["fetch-a"].pid
        os.killpg(zombie, signal.SIGSTOP)
        run.kills = 1  # a paused batch is fetched again by someone else
        run.per_kill = HOLDS
        workers.start("fetch-b", "fetch", concurrency=POOL)
        run.finish()
        os.killpg(zombie, signal.SIGCONT)
        log = Path(tmp_path) / "fetch-a.log"
        wait_until(
            lambda: "result dropped" in log.read_text(errors="replace"),
            timeout=60,
            interval=0.5,
            what="the resumed worker to try its late write",
        )
        figures = run.ledger()
    dropped = log.read_text(errors="replace").count("result dropped")
    print(f"late writes rejected: {dropped}")
    assert dropped >= 1
    assert figures.extra_fetches >= 1  # the paused batch was fetched again by fetch-b
