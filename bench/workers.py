"""The Celery workers of a distributed run, started by the bench in their own process groups.

Layouts: "one" is a single worker on fetch,extract,download with -c CONCURRENCY (default 2, one pool
process per core of the 2-core reference machine); "per-queue" is the docs' distributed layout (docs/distributed.md),
one worker per stage queue: fetch -c 4, extract -c 2, download -c 2.
"""

import os
import socket
import time
from pathlib import Path

from bench import REPO, BenchError
from crawlproject.processes import WorkerProcess
from crawlproject.queues import DOWNLOAD, EXTRACT, FETCH

LAYOUTS = ("one", "per-queue")


def layout_plan(layout: str, concurrency: int) -> list[tuple[str, str, int]]:
    """(label, queues, concurrency) of each worker."""
    if layout == "one":
        return [("all", f"{FETCH},{EXTRACT},{DOWNLOAD}", concurrency)]
    if layout == "per-queue":
        return [(FETCH, FETCH, 4), (EXTRACT, EXTRACT, 2), (DOWNLOAD, DOWNLOAD, 2)]
    raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")


class WorkerPool:
    def __init__(self, *, layout: str, concurrency: int, env: dict, log_dir: Path):
        host = socket.gethostname()
        self.workers = [
            WorkerProcess(
                queues=queues,
                name=f"bench-{label}-{os.getpid()}@{host}",
                concurrency=count,
                log_file=log_dir / f"worker-{label}.log",
                env=env,
                cwd=REPO,
            )
            for label, queues, count in layout_plan(layout, concurrency)
        ]
        self.log_dir = log_dir

    def start(self) -> None:
        for worker in self.workers:
            worker.start()

    @staticmethod
    def refuse_others(app) -> None:
        """Workers already on this broker would take the bench's messages (ids of another database)."""
        others = sorted(name for reply in app.control.ping(timeout=1.0) for name in reply)
        if others:
            raise BenchError(
                f"other Celery workers listen on this broker ({', '.join(others)}): they would take the bench's "
                "work. Stop them or use another Redis database (CELERY_BROKER_URL=redis://host:6379/N)"
            )

    def wait_ready(self, app, timeout: float = 90) -> None:
        """Until every worker answers a ping (so worker start-up is not part of the crawl's time)."""
        deadline, waiting = time.monotonic() + timeout, {w.name for w in self.workers}
        while waiting and time.monotonic() < deadline:
            dead = [w for w in self.workers if not w.alive()]
            if dead:
                code = dead[0].process.returncode
                raise BenchError(f"a bench worker exited with {code}; see {self.log_dir}/worker-*.log")
            for reply in app.control.ping(destination=sorted(waiting), timeout=1.0):
                waiting -= set(reply)
        if waiting:
            raise BenchError(f"bench workers not ready after {timeout:.0f} s: {sorted(waiting)}")

    def roots(self) -> set[int]:
        return {w.pid for w in self.workers}

    def stop(self, timeout: float = 20) -> None:
        """Warm shutdown (pool processes write their last statement counts), then kill the groups."""
        for worker in self.workers:
            worker.terminate()
        for worker in self.workers:
            worker.stop(timeout)
        self.workers = []
