"""Fault suite, scenario 9: the embedded default (SQLite, filesystem broker, the workers the crawl
command starts itself): a baseline crawl, then a crawl whose worker processes are killed."""

import time
from pathlib import Path

import pytest

from tests.conftest import run_manage
from tests.faults.harness import HOLDS, TIMEOUT, FaultCrawl, full_only, pool_children, sigkill, site_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(TIMEOUT)]


class NoWorkers:
    """The crawl command starts its own worker: nothing for the harness to start."""

    env: dict = {}


def embedded_env(worker_env: dict, var: Path) -> dict:
    env = {k: v for k, v in worker_env.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env["CRAWLHUB_VAR_DIR"] = str(var)
    return env


@full_only
@pytest.mark.parametrize("kill", [False, True], ids=["baseline", "kill"])
def test_9_the_embedded_mode_survives_killed_workers_without_database_locks(worker_env, tmp_path, kill):
    site = site_of(quick=100, full=2000)
    env = embedded_env(worker_env, tmp_path / "var")
    (tmp_path / "var").mkdir()
    assert run_manage(["migrate", "-v0"], env).returncode == 0
    scenario = "9 embedded (SQLite): " + ("SIGKILL pool children" if kill else "baseline")
    with FaultCrawl(scenario, site, NoWorkers(), env, tmp_path, delay=0.05, crawl_workers=2) as run:
        run.per_kill = HOLDS
        run.start()
        if kill:
            run.wait_for(lambda: run.done() >= 20)
            for _ in range(3):
                pool = [child for worker in pool_children(run.crawl.pid) for child in pool_children(worker)]
                if pool and sigkill(pool[0]):
                    run.kills += 1
                time.sleep(2)
        run.finish()
        figures = run.ledger()
    logs = run.stdout + run.stderr + "".join(p.read_text(errors="replace") for p in (tmp_path / "var").rglob("*.log"))
    assert "database is locked" not in logs
    assert figures.kills >= 1 if kill else figures.kills == 0
