"""The Python API (`from crawlhub import ...`) in a plain script, and a crawl stopped by SIGTERM: its
embedded worker stops with it (as with Ctrl-C) and the next crawl resumes the job."""

import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import BASE_DIR, last_json_line, migrate_embedded, run_manage
from tests.console.test_crawl_command import HTML, small_site
from tests.helpers import wait_until
from tests.servers import Site, SiteServer

pytestmark = pytest.mark.integration


@pytest.fixture
def embedded_env(tmp_path):
    """The embedded default (SQLite and the filesystem broker in a var/ of the test's own), migrated."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env |= {"CRAWLHUB_VAR_DIR": str(tmp_path / "var"), "DJANGO_SETTINGS_MODULE": "crawlproject.settings"}
    env |= {"CRAWL_MAX_ATTEMPTS": "1"}  # a failure is final at once: no back-off to wait out
    migrate_embedded(env)
    return env


SCRIPT = """
import json, sys
import crawlhub

shop = crawlhub.project("shop", allow_private=True)
new = crawlhub.add_seeds(shop, [sys.argv[1]])
result = crawlhub.run(shop, timeout=120)
urls = sorted(item["url"] for item in crawlhub.items(shop, kind="page", job=result.job))
print(json.dumps({"new": new, "completed": result.completed, "state": result.job.state, "urls": urls}))
"""


def test_a_script_crawls_a_site_with_the_python_api(embedded_env, tmp_path):
    script = tmp_path / "crawl_shop.py"
    script.write_text(SCRIPT)
    env = embedded_env | {"PYTHONPATH": str(BASE_DIR)}
    env.pop("DJANGO_SETTINGS_MODULE")  # crawlhub sets Django up itself
    with SiteServer(small_site()) as server:
        done = subprocess.run(
            [sys.executable, str(script), f"{server.url}/"], env=env, capture_output=True, text=True, timeout=200
        )
    assert done.returncode == 0, done.stderr
    result = last_json_line(done.stdout)
    assert (result["new"], result["completed"], result["state"]) == (1, True, "succeeded")
    assert result["urls"] == [f"{server.url}/", f"{server.url}/a", f"{server.url}/b"]


def chain_site(n: int) -> Site:
    """/0 -> /1 -> ... -> /n-1: one page at a time, so a crawl of it takes as long as the server's delay makes it."""
    page = lambda i: (200, HTML, f'<a href="/{i + 1}">next</a>'.encode())  # noqa: E731
    return Site(files={f"/{i}": page(i) for i in range(n)})


def embedded_workers_of(pid: int) -> list[int]:
    """Pids of the celery workers the crawl command `pid` started (named embedded-<pid>@host)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "celery" in cmdline and f"embedded-{pid}@" in cmdline:
            found.append(int(entry))
    return found


def test_sigterm_stops_the_embedded_worker_and_the_next_crawl_resumes(embedded_env):
    with SiteServer(chain_site(12), delay=0.3) as server:
        crawl = subprocess.Popen(
            [sys.executable, "manage.py", "crawl", f"{server.url}/0", "--project", "chain", "--allow-private"],
            cwd=BASE_DIR,
            env=embedded_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        left = []
        try:
            wait_until(lambda: len(server.paths()) >= 3, timeout=60, interval=0.1, what="the crawl to be under way")
            assert embedded_workers_of(crawl.pid), "it started its worker"
            crawl.send_signal(signal.SIGTERM)
            _out, err = crawl.communicate(timeout=60)

            def stopped() -> bool:
                left[:] = embedded_workers_of(crawl.pid)  # killed in `finally` if still there
                return not left

            wait_until(stopped, timeout=60, what=lambda: f"the worker it started to stop, not go on crawling: {left}")
            assert crawl.returncode == 1
            assert "interrupted: job 1 of chain is paused; run the same command again to resume it" in err
            fetched = len(server.paths())
            assert fetched < 12
            resumed = run_manage(["crawl", f"{server.url}/0", "--project", "chain", "--json"], embedded_env)
        finally:
            for pid in left:
                os.kill(pid, signal.SIGKILL)
            if crawl.poll() is None:
                crawl.kill()
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed the paused job 1 of project chain" in resumed.stderr
    summary = last_json_line(resumed.stdout)
    assert (summary["job"], summary["state"], summary["pages_fetched"]) == (1, "succeeded", 12)
