"""Structured logs (crawlproject/logconfig.py): with CRAWLHUB_LOG_FORMAT=json real workers write one JSON object
per log line, with the task and the project bound inside tasks; the default stays plain text."""

import json
import logging
import os
import re
import socket
import subprocess
import sys

import httpx
import pytest
import structlog

from crawl.models import Project
from crawlproject.control_tasks import TASK_ROUTES
from crawlproject.logconfig import logging_config
from crawlproject.queues import CONTROL
from tests.conftest import BASE_DIR, Workers, generated_site, last_json_line, run_manage
from tests.helpers import wait_until
from tests.servers import SiteServer

STAGES = ("fetch", "extract", "download")
# A record rendered by a text formatter: ours (plain) or Celery's own.
TEXT_RECORD = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ |\[\d{4}-\d\d-\d\d [^]]*: [A-Z]+/)")


@pytest.fixture
def json_workers(worker_env, broker, tmp_path):
    pool = Workers(worker_env | {"CRAWLHUB_LOG_FORMAT": "json"}, tmp_path)
    yield pool
    pool.stop_all()


def crawl_tiny_site(env: dict) -> dict:
    with SiteServer.generated(generated_site(20)) as server:
        args = ["crawl", f"{server.url}/", "--allow-private", "--json", "--workers", "0", "--project", "logs"]
        done = run_manage(args, env)
    assert done.returncode == 0, done.stdout + done.stderr
    return last_json_line(done.stdout)


def formatter(log_format: str) -> logging.Formatter:
    config = dict(logging_config(log_format=log_format, root_level="INFO", crawlhub_level="INFO"))
    spec = dict(config["formatters"][log_format])
    factory = spec.pop("()", None)
    return factory(**spec) if factory else logging.Formatter(spec["format"])


def record(message: str, *args, **extra) -> logging.LogRecord:
    made = logging.LogRecord("crawlhub.fetch", logging.WARNING, __file__, 1, message, args, None)
    made.__dict__.update(extra)
    return made


CONTROL_TASKS = {name for name, route in TASK_ROUTES.items() if route["queue"] == CONTROL}


@pytest.mark.integration
def test_it_writes_every_worker_log_line_as_json_with_the_task_context(json_workers, worker_env, tmp_path):
    for stage in STAGES:
        json_workers.start(stage, stage)
    summary = crawl_tiny_site(worker_env)
    json_workers.stop_all(warm=True)  # flushes the logs
    project_id = Project.objects.get(slug="logs").id

    logs = {stage: (tmp_path / f"{stage}.log").read_text().splitlines() for stage in STAGES}
    lines = [line for stage_lines in logs.values() for line in stage_lines]
    assert not [line for line in lines if TEXT_RECORD.match(line)]
    ours = [json.loads(line) for line in lines if "crawlhub." in line]  # each must parse
    assert summary["pages_fetched"] > 0
    fetch_lines = [r for r in ours if r["logger"] == "crawlhub.fetch"]
    assert fetch_lines
    for line in fetch_lines:
        assert (line["task"], line["project_id"]) == ("crawl.fetch_batch", project_id)
        assert line["task_id"] and line["batch_size"] > 0 and line["level"] == "info"
    for stage, task in zip(STAGES, ("crawl.fetch_batch", "scrape.extract_batch", "media.download_batch"), strict=True):
        records = [json.loads(line) for line in logs[stage] if line.startswith("{")]
        succeeded = [r for r in records if r["logger"] == "celery.app.trace" and "succeeded" in r["event"]]
        assert succeeded, f"no finished task in the {stage} log"
        ran = {(r["task"], bool(r["task_id"])) for r in succeeded}
        assert (task, True) in ran and all(has_id for _, has_id in ran)
        assert {name for name, _ in ran} <= {task, *CONTROL_TASKS}, "its stage's tasks, and housekeeping"


@pytest.mark.integration
def test_it_writes_the_web_servers_lines_as_json_too(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = os.environ | {
        "DJANGO_SETTINGS_MODULE": "crawlproject.settings",
        "CRAWLHUB_LOG_FORMAT": "json",
        "CRAWLHUB_VAR_DIR": str(tmp_path),
        "GUNICORN_BIND": f"127.0.0.1:{port}",
    }
    cmd = [sys.executable, "-m", "gunicorn", "-c", "python:crawlproject.gunicorn_conf", "crawlproject.wsgi"]
    web = subprocess.Popen(cmd, cwd=BASE_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert wait_for_status(f"http://127.0.0.1:{port}/nowhere", web) == 404
    finally:
        web.terminate()
        output, _ = web.communicate(timeout=30)
    records = [json.loads(line) for line in output.splitlines()]  # every line is one JSON object
    loggers = {r["logger"] for r in records}
    assert {"gunicorn.error", "gunicorn.access", "django.request"} <= loggers
    assert any("GET /nowhere" in r["event"] for r in records if r["logger"] == "gunicorn.access")


def wait_for_status(url: str, proc: subprocess.Popen, timeout: float = 30) -> int:
    def status() -> int | None:
        assert proc.poll() is None, "gunicorn exited"
        try:
            return httpx.get(url, timeout=5).status_code
        except httpx.TransportError:
            return None

    return wait_until(status, timeout=timeout, what="gunicorn to answer")


def test_it_renders_standard_library_records_with_the_bound_context_as_json():
    with structlog.contextvars.bound_contextvars(task_id="t-1", project_id=7):
        line = formatter("json").format(record("lease lost for page %s", 42, page_id=42))
    got = json.loads(line)
    assert got["event"] == "lease lost for page 42"
    assert (got["logger"], got["level"], got["task_id"], got["project_id"], got["page_id"]) == (
        "crawlhub.fetch",
        "warning",
        "t-1",
        7,
        42,
    )


def test_it_keeps_plain_lines_by_default(settings):
    assert settings.CRAWLHUB_LOG_FORMAT == "plain"
    assert settings.LOGGING["formatters"] == {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}}
    line = formatter("plain").format(record("lease lost for page %s", 42))
    assert line.endswith(" WARNING crawlhub.fetch lease lost for page 42")
    assert TEXT_RECORD.match(line)


def test_log_files_are_readable_by_their_user_only(tmp_path, settings):
    """Issue 47, point 7: the workers' and the web server's log files are mode 0600, as the database
    file is, even when they existed with a wider mode."""
    from console.management.commands.serve import Command as Serve
    from crawlproject.processes import WorkerProcess

    class Quick(WorkerProcess):
        def command(self) -> list[str]:
            return [sys.executable, "-c", "print('a line a worker logged')"]

    settings.VAR_DIR = tmp_path
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "serve-web.log").write_text("an older line\n")
    os.chmod(tmp_path / "log" / "serve-web.log", 0o644)
    worker = Quick(queues="fetch", name="quick", concurrency=1, log_file=tmp_path / "log" / "worker.log")
    worker.start()
    web = Serve()._spawn("web", [sys.executable, "-c", "print('a line the web server logged')"])
    assert worker.process.wait(30) == 0 and web.wait(30) == 0
    logs = sorted(p.name for p in (tmp_path / "log").iterdir())
    assert logs == ["serve-web.log", "web-access.log", "worker.log"]
    assert {name: oct((tmp_path / "log" / name).stat().st_mode & 0o777) for name in logs} == dict.fromkeys(
        logs, "0o600"
    )
    assert "a line a worker logged" in (tmp_path / "log" / "worker.log").read_text()
