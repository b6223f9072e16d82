"""Fault suite, scenarios 4 and 5: the broker and the database go away mid-crawl.

Each scenario runs its own Redis or PostgreSQL (tests/faults/servers.py), so the machine's servers,
which the rest of the suite uses, are never touched.
"""

import pytest

from tests.conftest import run_manage
from tests.faults.harness import HOLDS, POOL, TIMEOUT, FaultCrawl, full_only, site_of
from tests.faults.servers import PostgresServer, RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(TIMEOUT)]


@pytest.fixture
def private_redis(tmp_path):
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


@pytest.fixture
def private_postgres():
    server = PostgresServer().start()
    yield server
    server.stop()


@full_only
@pytest.mark.parametrize("lose_queue", [False, True], ids=["restart", "killed-queue-lost"])
def test_4_redis_restarted_or_lost_mid_crawl(workers, worker_env, tmp_path, private_redis, lose_queue):
    env = worker_env | {"CELERY_BROKER_URL": private_redis.url}
    site = site_of(quick=200, full=2000)
    what = "killed, queue lost" if lose_queue else "restarted"
    with FaultCrawl(f"4 Redis {what} mid-crawl", site, workers, env, tmp_path, delay=0.02) as run:
        run.per_kill = 3 * HOLDS * POOL  # every fetch batch in flight or reserved at the outage
        run.start_workers()
        run.start()
        run.wait_for(lambda: run.done() >= 40)
        if lose_queue:
            private_redis.kill_and_lose_everything()
        else:
            private_redis.restart()
        run.kills = 1
        run.finish()
        run.ledger(broker_url=private_redis.url)
    logs = "".join(p.read_text(errors="replace") for p in tmp_path.glob("*.log"))
    assert "Connection to broker lost" in logs or "Cannot connect to redis" in logs


@full_only
def test_5_postgresql_restarted_mid_crawl(workers, worker_env, tmp_path, private_postgres):
    env = worker_env | {"DATABASE_URL": private_postgres.url}
    assert run_manage(["migrate", "-v0"], env).returncode == 0
    site = site_of(quick=200, full=2000)
    with FaultCrawl("5 PostgreSQL restarted mid-crawl", site, workers, env, tmp_path, delay=0.02) as run:
        run.per_kill = 3 * HOLDS * POOL  # every batch whose transaction was cut
        run.start_workers()
        run.start()
        run.wait_for(lambda: run.done() >= 40)
        private_postgres.restart()
        run.kills = 1
        run.finish()
        run.ledger()
