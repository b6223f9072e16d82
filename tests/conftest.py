"""Shared fixtures: a loopback test site, a clean Redis broker db, real Celery worker processes."""

import atexit
import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import redis
from django.conf import settings

from bench.sitegen import Site, site_plan
from bench.truth import ground_truth
from crawlproject.processes import WorkerProcess
from tests.s3 import bucket, s3_endpoint  # noqa: F401 - fixtures shared by the storage and media tests
from tests.servers import SiteServer

BASE_DIR = Path(settings.BASE_DIR)
FAULTS = os.environ.get("CRAWLHUB_FAULTS", "") == "full"
WORKER_FIXTURES = {"workers", "json_workers"}  # fixtures that start `celery worker` processes


DURATIONS = Path(__file__).with_name("durations.json")  # seconds per test file: `python -m tests.durations`


def pytest_collection_modifyitems(config, items):
    """A test that uses real Celery workers is an integration test, marked or not (`make test-quick`
    leaves those out). Tests marked `fault` are long fault scenarios: `make faults`
    (CRAWLHUB_FAULTS=full) runs them. The files that took longest last time go first (`make test`
    hands whole files to its processes in this order: a long file started last would run alone)."""
    items.sort(key=_longest_first(items))
    for item in items:
        if WORKER_FIXTURES & set(getattr(item, "fixturenames", ())) and not item.get_closest_marker("integration"):
            item.add_marker(pytest.mark.integration)
    if FAULTS:
        return
    skip = pytest.mark.skip(reason="a long fault scenario: part of `make faults`, not of `make test`")
    for item in items:
        if item.get_closest_marker("fault"):
            item.add_marker(skip)


def _longest_first(items):
    """A sort key: each file by its recorded duration, longest first (a file not recorded counts as a
    short one), its tests in their own order."""
    try:
        seconds = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        seconds = {}
    rank = {}
    for item in items:  # one rank per file, in collection order among equals: every process sorts alike
        rank.setdefault(item.nodeid.split("::", 1)[0], len(rank))
    return lambda item: (-seconds.get(item.nodeid.split("::", 1)[0], 0.0), rank[item.nodeid.split("::", 1)[0]])


# Not linked from any page of the site: targets for the bad-input tests.
UNLINKED = {
    "/error500": (500, {"Content-Type": "text/html"}, b"<h1>oops</h1>"),
    "/data.bin": (200, {"Content-Type": "application/octet-stream"}, bytes(range(256)) * 8),
}


def generated_site(n: int, seed: int = 7) -> Site:
    """The generated site of n pages (bench.sitegen). Its ground truth is the same at any address:
    SiteServer.generated serves it at its own."""
    return site_plan(n=n, seed=seed, base_url="http://127.0.0.1")


@pytest.fixture(scope="session")
def site():
    return generated_site(300)


@pytest.fixture(scope="session")
def truth(site):
    return ground_truth(site)


@pytest.fixture
def make_project(db):
    """A function making projects: make_project(name="shop", allow_private=True) creates one with
    those fields (the slug made from the name) and the defaults of a new project for the others."""
    from django.utils.text import slugify

    from crawl.models import Project

    def make(name: str = "project", **fields) -> "Project":
        return Project.objects.create(name=name, slug=slugify(name), **fields)

    return make


@pytest.fixture
def site_server(site):
    server = SiteServer.generated(site)
    server.site.files |= UNLINKED
    with server:
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

    def start(self, name: str, queues: str, concurrency: int = 2) -> WorkerProcess:
        worker = WorkerProcess(
            queues=queues,
            name=f"{name}@%h",
            concurrency=concurrency,
            log_file=self.log_dir / f"{name}.log",
            env=self.env,
            loglevel="INFO",
            heartbeat=True,
        )
        worker.start()
        self.procs[name] = worker
        return worker

    def kill(self, name: str, sig=signal.SIGKILL) -> None:
        self.procs.pop(name).kill(sig)

    def stop_all(self, *, warm: bool = False) -> None:
        """Stop every worker at once. At the end of a test its checks are made, so the process groups
        are killed (a warm shutdown costs seconds per worker); `warm` lets running tasks finish and
        the workers write their last log lines first."""
        procs = list(self.procs.values())
        self.procs.clear()
        if warm:
            for worker in procs:
                worker.terminate()
            for worker in procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    worker.process.wait(20)
        for worker in procs:
            worker.kill()


@pytest.fixture
def workers(worker_env, broker, tmp_path):
    pool = Workers(worker_env, tmp_path)
    yield pool
    pool.stop_all()


def beat_stop(proc: subprocess.Popen) -> None:
    """Stop a `celery beat` process: a SIGTERM that lands while beat publishes a task can be lost
    (the broker client turns the SystemExit into an error beat logs and survives), so send it again."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait(20)


def run_manage(args: list[str], env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=timeout
    )


_MIGRATED: dict[str, Path] = {}  # by settings module: a database `migrate` made in this test process


def migrate_embedded(env: dict) -> None:
    """`manage.py migrate` for env's embedded database (SQLite in its CRAWLHUB_VAR_DIR). The real
    command runs once per test process and settings module; every later database is a copy of that
    one (sqlite3's backup), which saves each test the seconds a fresh migrate takes."""
    assert "DATABASE_URL" not in env, "an embedded env: SQLite in CRAWLHUB_VAR_DIR"
    module = env.get("DJANGO_SETTINGS_MODULE", "crawlproject.settings")
    template = _MIGRATED.get(module)
    if template is None:
        folder = Path(tempfile.mkdtemp(prefix="crawlhub-migrated-"))
        atexit.register(shutil.rmtree, folder, True)
        done = run_manage(["migrate", "-v0"], env | {"CRAWLHUB_VAR_DIR": str(folder)})
        assert done.returncode == 0, done.stderr
        template = _MIGRATED[module] = folder / "db.sqlite3"
    target = Path(env["CRAWLHUB_VAR_DIR"]) / "db.sqlite3"
    target.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(template)) as source, contextlib.closing(sqlite3.connect(target)) as copy:
        source.backup(copy)


def last_json_line(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def export_pages(env: dict, project: str) -> list[dict]:
    done = run_manage(["export", project, "--what", "pages"], env)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
