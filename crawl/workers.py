"""Celery workers the crawl command starts itself in embedded mode (same code as `celery worker`)."""

import contextlib
import logging
import os
import signal
import subprocess
import sys

from django.conf import settings

from crawlproject.queues import STAGE_QUEUES

log = logging.getLogger("crawlhub.workers")


def worker_command(
    *, queues: str, name: str, concurrency: int, loglevel: str = "WARNING", heartbeat: bool = False
) -> list[str]:
    """`celery worker` on the given queues, prefork, without mingle and gossip (and, unless asked,
    without heartbeats): the command line of every worker this project starts itself."""
    command = [sys.executable, "-m", "celery", "-A", "crawlproject", "worker", "-Q", queues, "-n", name]
    command += ["-c", str(concurrency), "-P", "prefork", "-l", loglevel, "--without-mingle", "--without-gossip"]
    return command if heartbeat else [*command, "--without-heartbeat"]


class EmbeddedWorker:
    """One `celery worker` child process consuming every stage queue."""

    def __init__(self, *, concurrency: int, queues=STAGE_QUEUES, name: str | None = None):
        self.concurrency = concurrency
        self.queues = ",".join(queues)
        self.name = name or f"embedded-{os.getpid()}@%h"
        self.process: subprocess.Popen | None = None
        self.restarts = 0

    def command(self) -> list[str]:
        return worker_command(queues=self.queues, name=self.name, concurrency=self.concurrency)

    def start(self) -> None:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "crawlproject.settings"),
        }
        log_dir = settings.VAR_DIR / "log"
        log_dir.mkdir(parents=True, exist_ok=True)
        with open(log_dir / "embedded-worker.log", "ab") as out:
            self.process = subprocess.Popen(
                self.command(),
                cwd=settings.BASE_DIR,
                env=env,
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

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

    def stop(self, timeout: float = 30) -> None:
        """Warm shutdown (finish running tasks), then kill whatever is left of the process group."""
        if self.process is None:
            return
        if self.alive():
            self.process.terminate()  # the main process only: its pool children finish their tasks
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
