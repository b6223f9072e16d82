"""The Celery workers of a distributed run, started by the bench in their own process groups.

Layouts: "one" is a single worker on fetch,extract,download with -c CONCURRENCY (default 2, one pool
process per core of the 2-core reference machine); "per-queue" is the README's distributed layout,
one worker per stage queue: fetch -c 4, extract -c 2, download -c 2.
"""

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from bench import REPO, BenchError
from crawl.workers import worker_command

LAYOUTS = ("one", "per-queue")


def layout_plan(layout: str, concurrency: int) -> list[tuple[str, str, int]]:
    """(label, queues, concurrency) of each worker."""
    if layout == "one":
        return [("all", "fetch,extract,download", concurrency)]
    if layout == "per-queue":
        return [("fetch", "fetch", 4), ("extract", "extract", 2), ("download", "download", 2)]
    raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")


class WorkerPool:
    def __init__(self, *, layout: str, concurrency: int, env: dict, log_dir: Path):
        self.plan, self.env, self.log_dir = layout_plan(layout, concurrency), env, log_dir
        host = socket.gethostname()
        self.names = [f"bench-{label}-{os.getpid()}@{host}" for label, _, _ in self.plan]
        self.processes: list[subprocess.Popen] = []

    def start(self) -> None:
        for name, (label, queues, concurrency) in zip(self.names, self.plan, strict=True):
            with open(self.log_dir / f"worker-{label}.log", "ab") as out:
                self.processes.append(
                    subprocess.Popen(
                        worker_command(queues=queues, name=name, concurrency=concurrency),
                        cwd=REPO,
                        env=self.env,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )

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
        deadline, waiting = time.monotonic() + timeout, set(self.names)
        while waiting and time.monotonic() < deadline:
            dead = [p for p in self.processes if p.poll() is not None]
            if dead:
                raise BenchError(f"a bench worker exited with {dead[0].returncode}; see {self.log_dir}/worker-*.log")
            for reply in app.control.ping(destination=sorted(waiting), timeout=1.0):
                waiting -= set(reply)
        if waiting:
            raise BenchError(f"bench workers not ready after {timeout:.0f} s: {sorted(waiting)}")

    def roots(self) -> set[int]:
        return {p.pid for p in self.processes}

    def stop(self, timeout: float = 20) -> None:
        """Warm shutdown (pool processes write their last statement counts), then kill the groups."""
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        self.processes = []
