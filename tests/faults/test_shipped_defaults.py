"""Fault suite, scenarios 10 and 11: a worker killed and PostgreSQL restarted at the settings we ship
(600 s leases, 30 s resend of lost suspects, 30 s retry base; the rest of the suite shortens them), three
stage workers. Each scenario crawls the site once without a fault and once with it: the fault may
cost the crawl less than DELAY_BOUND seconds, and the ledger holds (nothing lost, nothing twice).
"""

import pytest

from tests.conftest import run_manage
from tests.faults.harness import HOLDS, POOL, TIMEOUT, FaultCrawl, count_pages, full_only, pool_children, sigkill
from tests.faults.harness import site_of as sized_site
from tests.faults.servers import PostgresServer
from tests.helpers import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(2 * TIMEOUT)]

SHIPPED = {"CRAWL_LEASE_SECONDS": "600", "CRAWL_REPUBLISH_SECONDS": "30", "CRAWL_RETRY_BASE_SECONDS": "30"}
DELAY_BOUND = 60.0
SERVER_DELAY = 0.1  # seconds a page takes to answer: the crawl lasts long enough to be hit mid-way


def site():
    return sized_site(quick=300, full=600)


def crawl_seconds(scenario: str, site, workers, env: dict, tmp_path, fault=None) -> tuple[float, object]:
    """Crawl the site with three stage workers at the shipped settings, injecting `fault(run)` once a
    quarter of it is done; the crawl's seconds and its ledger figures."""
    project = "baseline" if fault is None else "faults"
    with FaultCrawl(scenario, site, workers, env, tmp_path, delay=SERVER_DELAY, extra_env=SHIPPED) as run:
        run.project = project
        run.start_workers()
        run.start()
        if fault is not None:
            run.wait_for(lambda: run.done() >= len(run.truth["pages"]) // 4)
            fault(run)
        run.finish()
        figures = run.ledger()
    workers.stop_all()
    return run.seconds, figures


@pytest.fixture
def private_postgres():
    server = PostgresServer().start()
    yield server
    server.stop()


@full_only
@pytest.mark.parametrize("whole", [True, False], ids=["worker", "pool-child"])
def test_10_a_worker_killed_at_the_shipped_settings_costs_under_a_minute(workers, worker_env, tmp_path, whole):
    generated = site()
    baseline, _ = crawl_seconds("10 baseline at the shipped settings", generated, workers, worker_env, tmp_path)

    def kill_fetch_worker(run):
        if whole:  # the process group, started again under its name (a supervisor's restart)
            workers.kill("fetch")
            workers.start("fetch", "fetch", concurrency=POOL)
        else:  # one pool process, as the kernel's OOM killer does: the worker lives on
            children = pool_children(workers.procs["fetch"].pid)
            assert children and sigkill(children[0])
        run.kills = 1
        run.per_kill = HOLDS * (POOL if whole else 1)

    what = "a whole fetch worker" if whole else "a fetch pool child"
    faulted, figures = crawl_seconds(
        f"10 SIGKILL {what}, shipped settings", generated, workers, worker_env, tmp_path, kill_fetch_worker
    )
    print(f"\nbaseline {baseline:.1f} s, with the kill {faulted:.1f} s")
    assert figures.kills == 1
    assert faulted - baseline < DELAY_BOUND, f"the kill cost {faulted - baseline:.0f} s (baseline {baseline:.0f} s)"


@full_only
def test_11_postgresql_restarted_at_the_shipped_settings_costs_under_a_minute(
    workers, worker_env, tmp_path, private_postgres
):
    env = worker_env | {"DATABASE_URL": private_postgres.url}
    assert run_manage(["migrate", "-v0"], env).returncode == 0
    generated = site()
    baseline, _ = crawl_seconds("11 baseline at the shipped settings", generated, workers, env, tmp_path)

    def restart(run):
        private_postgres.restart()
        run.kills = 1
        run.per_kill = 3 * HOLDS * POOL  # every batch whose transaction was cut
        wait_until(lambda: count_pages(run.env, run.project, "done") > 0, timeout=30, what="PostgreSQL to come back")

    faulted, _ = crawl_seconds("11 PostgreSQL restarted, shipped settings", generated, workers, env, tmp_path, restart)
    print(f"\nbaseline {baseline:.1f} s, with the restart {faulted:.1f} s")
    assert faulted - baseline < DELAY_BOUND, f"the restart cost {faulted - baseline:.0f} s (baseline {baseline:.0f} s)"
