"""crawlproject.processes with a real Celery worker on the test Redis broker."""

import pytest
import redis

from crawlproject.processes import WorkerProcess
from fetch.tasks import fetch_batch
from tests.helpers import wait_until

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


def test_the_reaper_runs_at_once_while_ten_thousand_fetch_messages_are_owed(broker, worker_env, tmp_path):
    """Housekeeping rides the control queue every worker also consumes: it never waits behind a
    stage's backlog (here 10,000 fetch messages, each a batch of an id no row has)."""
    import time
    from datetime import timedelta

    from django.utils import timezone

    from crawl.models import Page
    from crawl.services.projects import project_get_or_create, seeds_add
    from crawl.tasks import reap_task

    project = project_get_or_create(name="backlog", allow_private=True)
    (page_id,) = seeds_add(project=project, urls=["http://127.0.0.1:9/"])
    Page.objects.filter(id=page_id).update(state="leased", lease_expires_at=timezone.now() - timedelta(seconds=1))
    queue = redis.Redis.from_url(broker)
    for n in range(10_000):
        fetch_batch.apply_async(args=([10**9 + n],), queue="fetch")
    assert queue.llen("fetch") >= 10_000
    worker = WorkerProcess(
        queues="fetch", name="control@%h", concurrency=1, log_file=tmp_path / "worker.log", env=worker_env
    )
    worker.start()
    try:
        sent = time.monotonic()
        reap_task.apply_async(queue="control")
        wait_until(
            lambda: Page.objects.get(id=page_id).state != "leased",
            timeout=60,
            what=lambda: "the reaper:\n" + (tmp_path / "worker.log").read_text()[-2000:],
        )
        waited = time.monotonic() - sent
        owed = queue.llen("fetch")
    finally:
        worker.stop(timeout=5)
    assert Page.objects.get(id=page_id).state == "queued", (tmp_path / "worker.log").read_text()[-2000:]
    assert owed > 5_000, f"the reaper ran after {waited:.1f} s, with {owed} fetch messages still owed"


def test_a_jobs_tick_runs_at_once_while_ten_thousand_fetch_messages_are_owed(broker, worker_env, tmp_path):
    """The jobs tick rides the control queue too: a job whose project owes nothing more ends as soon
    as a tick is sent, with 10,000 fetch messages queued in front of the worker."""
    import time

    from console.models import Job
    from console.tasks import jobs_tick_task
    from crawl.services.projects import project_get_or_create

    project = project_get_or_create(name="ticked", allow_private=True)
    job = Job.objects.create(project=project, state=Job.State.RUNNING, trigger=Job.Trigger.COMMAND)
    queue = redis.Redis.from_url(broker)
    for n in range(10_000):
        fetch_batch.apply_async(args=([10**9 + n],), queue="fetch")
    worker = WorkerProcess(
        queues="fetch", name="ticks@%h", concurrency=1, log_file=tmp_path / "worker.log", env=worker_env
    )
    worker.start()
    try:
        sent = time.monotonic()
        jobs_tick_task.apply_async(queue="control")
        wait_until(
            lambda: Job.objects.get(id=job.id).state != Job.State.RUNNING,
            timeout=60,
            what=lambda: "the jobs tick:\n" + (tmp_path / "worker.log").read_text()[-2000:],
        )
        waited = time.monotonic() - sent
        owed = queue.llen("fetch")
    finally:
        worker.stop(timeout=5)
    job.refresh_from_db()
    assert (job.state, job.message) == (Job.State.SUCCEEDED, "nothing was owed"), (tmp_path / "worker.log").read_text()[
        -2000:
    ]
    assert owed > 5_000, f"the jobs tick ran after {waited:.1f} s, with {owed} fetch messages still owed"
