"""Celery worker processes this project starts itself: the crawl command's embedded worker, the
bench's workers and the tests' (same code as `celery worker`)."""

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from celery import current_app
from django.conf import settings

from crawlproject.envsafety import private_file
from crawlproject.queues import STAGE_QUEUES, with_control

log = logging.getLogger("crawlhub.workers")
DRAIN_SECONDS = 20.0  # at the end of a crawl, how long the embedded worker may take over leftover messages


def worker_command(
    *, queues: str, name: str, concurrency: int, loglevel: str = "WARNING", heartbeat: bool = False
) -> list[str]:
    """`celery worker` on the given queues and the control queue, prefork, without mingle and gossip
    (and, unless asked, without heartbeats): the command line of every worker this project starts
    itself."""
    command = [sys.executable, "-m", "celery", "-A", "crawlproject", "worker", "-Q", with_control(queues), "-n", name]
    command += ["-c", str(concurrency), "-P", "prefork", "-l", loglevel, "--without-mingle", "--without-gossip"]
    return command if heartbeat else [*command, "--without-heartbeat"]


class WorkerProcess:
    """One `celery worker` process in a session of its own (so its whole process group can be
    signalled), its output appended to log_file."""

    def __init__(
        self,
        *,
        queues: str,
        name: str,
        concurrency: int,
        log_file: Path,
        env: dict | None = None,
        cwd: Path | None = None,
        loglevel: str = "WARNING",
        heartbeat: bool = False,
    ):
        self.queues, self.name, self.concurrency = queues, name, concurrency
        self.log_file, self.env, self.cwd = log_file, env, cwd
        self.loglevel, self.heartbeat = loglevel, heartbeat
        self.process: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def command(self) -> list[str]:
        return worker_command(
            queues=self.queues,
            name=self.name,
            concurrency=self.concurrency,
            loglevel=self.loglevel,
            heartbeat=self.heartbeat,
        )

    def start(self) -> None:
        private_file(self.log_file)  # mode 0600, as the database file
        with open(self.log_file, "ab") as out:
            self.process = subprocess.Popen(
                self.command(),
                cwd=self.cwd or settings.BASE_DIR,
                env=self.env,
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def drain(self, timeout: float = DRAIN_SECONDS) -> bool:
        """Wait (at most timeout) until its queues hold no message; whether they emptied.

        At the end of a crawl the rows owe nothing, so what is left in the queues are duplicates that
        a consumer takes as no-ops (a batch republished after a slow lease, a wakeup); consumed now,
        they do not sit in the embedded broker until the next run."""
        deadline = time.monotonic() + timeout
        with current_app.connection_for_write() as connection:
            while True:
                queued = sum(_queued(connection, queue) for queue in self.queues.split(","))
                if not queued or not self.alive() or time.monotonic() > deadline:
                    return not queued
                time.sleep(0.2)

    def terminate(self) -> None:
        """Ask for a warm shutdown: the main process only, its pool children finish their tasks."""
        if self.alive():
            self.process.terminate()

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the whole process group (main process and pool children) and reap the main process."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)
        self.process.wait(30)

    def stop(self, timeout: float = 30) -> None:
        """Warm shutdown (finish running tasks), then kill whatever is left of the process group."""
        if self.process is None:
            return
        self.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout)
        self.kill()


def _queued(connection, queue: str) -> int:
    """Messages waiting in a queue (Redis has no key for an empty one: the passive declare fails)."""
    try:
        return connection.default_channel.queue_declare(queue, passive=True).message_count
    except connection.channel_errors:
        return 0


class EmbeddedWorker(WorkerProcess):
    """One `celery worker` child process consuming every stage queue."""

    def __init__(self, *, concurrency: int, queues=STAGE_QUEUES, name: str | None = None):
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "crawlproject.settings"),
        }
        super().__init__(
            queues=",".join(queues),
            name=name or f"embedded-{os.getpid()}@%h",
            concurrency=concurrency,
            log_file=settings.VAR_DIR / "log" / "embedded-worker.log",
            env=env,
        )
        self.restarts = 0

    def keep_alive(self, *, stalled: bool = False) -> None:
        """Restart a worker that died, or that is alive but made no progress while work is owed
        (`stalled`, judged by the caller from the rows). Its leased work comes back through the
        reaper. Seen after pool processes were killed under the filesystem transport: the worker
        stayed alive but stopped taking messages (the fault suite's scenario 9)."""
        if self.process is not None and not self.alive():
            log.warning("embedded worker exited with %s; restarting it", self.process.returncode)
        elif stalled:
            log.warning("embedded worker made no progress while work is owed; restarting it")
            self.stop(timeout=5)
        else:
            return
        self.restarts += 1
        self.start()
