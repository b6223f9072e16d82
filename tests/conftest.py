"""Shared fixtures: a loopback test site, a clean Redis broker db, real Celery worker processes."""

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from django.conf import settings

from crawl.workers import worker_command
from tests.s3 import bucket, s3_endpoint  # noqa: F401 - fixtures shared by the storage and media tests
from tests.site import SiteServer, build_site

BASE_DIR = Path(settings.BASE_DIR)


@pytest.fixture(scope="session")
def site():
    return build_site(300)


@pytest.fixture
def site_server(site):
    with SiteServer(site) as server:
        yield server


@pytest.fixture
def broker():
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.flushdb()
    yield settings.CELERY_BROKER_URL
    client.flushdb()


@pytest.fixture
def worker_env(transactional_db):
    """Environment for subprocesses: the project settings, pointed at the test database."""
    from django.db import connection

    db = connection.settings_dict
    url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    return {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "crawlproject.settings"}


class Workers:
    """Real `celery worker` processes, one process group each so a test can SIGKILL all of one."""

    def __init__(self, env: dict, log_dir: Path):
        self.env, self.log_dir, self.procs = env, log_dir, {}

    def start(self, name: str, queues: str, concurrency: int = 2) -> subprocess.Popen:
        cmd = worker_command(queues=queues, name=f"{name}@%h", concurrency=concurrency, loglevel="INFO", heartbeat=True)
        log = open(self.log_dir / f"{name}.log", "ab")
        proc = subprocess.Popen(
            cmd,
            cwd=BASE_DIR,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.procs[name] = proc
        return proc

    def kill(self, name: str, sig=signal.SIGKILL) -> None:
        proc = self.procs.pop(name)
        os.killpg(proc.pid, sig)
        proc.wait(30)

    def stop_all(self, *, warm: bool = False) -> None:
        """Stop every worker at once. At the end of a test its checks are made, so the process groups
        are killed (a warm shutdown costs seconds per worker); `warm` lets running tasks finish and
        the workers write their last log lines first."""
        procs = list(self.procs.values())
        self.procs.clear()
        if warm:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(20)
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in procs:
            proc.wait()


@pytest.fixture
def workers(worker_env, broker, tmp_path):
    pool = Workers(worker_env, tmp_path)
    yield pool
    pool.stop_all()


def run_manage(args: list[str], env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=timeout
    )


def last_json_line(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def export_pages(env: dict, project: str) -> list[dict]:
    done = run_manage(["export", project, "--what", "pages"], env)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
