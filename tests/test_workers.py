"""crawl.workers with a real Celery worker on the test Redis broker."""

import pytest
import redis

from crawl.tasks import fetch_batch
from crawl.workers import WorkerProcess

pytestmark = pytest.mark.integration


def test_drain_lets_the_worker_take_the_messages_left_in_its_queues(broker, worker_env, tmp_path):
    """At the end of a crawl the messages still queued are no-ops (here: batches of ids no row has);
    drain() waits while the worker takes them, so the broker keeps nothing for the next run."""
    for n in range(5):
        fetch_batch.apply_async(args=([10**9 + n],), queue="fetch")
    queue = redis.Redis.from_url(broker)
    assert queue.llen("fetch") == 5
    worker = WorkerProcess(
        queues="fetch", name="drain@%h", concurrency=1, log_file=tmp_path / "worker.log", env=worker_env
    )
    worker.start()
    try:
        emptied = worker.drain(timeout=60)
    finally:
        worker.stop()
    assert emptied and queue.llen("fetch") == 0, (tmp_path / "worker.log").read_text()
