"""Acceptance, with real workers and loopback servers: politeness and health are per server (host
and port). A dead port is named in the site-down alert and holds back only itself; a project
grouping by IP gives one server under two names (localhost, 127.0.0.1) one budget, read from the
server's own request log."""

import itertools
import subprocess
import sys

import pytest
from django.conf import settings

from console.health.models import Alert, Monitor
from console.health.monitors import monitors_ensure, monitors_tick
from console.selectors import errors_grouped
from crawl.models import Host, Page
from crawl.services.projects import project_get_or_create
from tests.conftest import last_json_line, run_manage
from tests.helpers import free_port, wait_until
from tests.servers import Site, SiteServer

pytestmark = pytest.mark.integration
HTML = {"Content-Type": "text/html; charset=utf-8"}


def linking(*paths: str) -> tuple:
    return (200, HTML, "".join(f'<a href="{p}">{p}</a>' for p in paths).encode())


def small_site(pages: int) -> Site:
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    site.files["/"] = linking(*(f"/p{i}" for i in range(pages)))
    for i in range(pages):
        site.files[f"/p{i}"] = linking()
    return site


def start(workers, env: dict) -> None:
    workers.env = env
    for stage in ("fetch", "extract", "download"):
        workers.start(stage, stage)


def crawl(env: dict, project: str, *urls: str) -> dict:
    args = ["crawl", *urls, "--allow-private", "--workers", "0", "--json", "--project", project, "--timeout", "60"]
    done = run_manage(args, env)
    assert done.returncode == 0, done.stdout + done.stderr
    return last_json_line(done.stdout)


def test_a_dead_port_is_named_in_the_alert_and_does_not_slow_another_ports_project(workers, worker_env):
    # A dead server's unreadable robots.txt holds it back for CRAWL_RETRY_BASE_SECONDS: the other
    # port's crawl runs inside that hold (it waited it out when both ports were one host).
    env = worker_env | {"CRAWL_RETRY_BASE_SECONDS": "60", "CRAWL_MAX_ATTEMPTS": "1"}
    start(workers, env)
    dead_port = free_port()
    a = f"127.0.0.1:{dead_port}"
    dead = project_get_or_create(name="dead port", allow_private=True, download_media=False)
    monitors_ensure([dead.id])
    Monitor.objects.filter(project=dead, kind="site_down").update(thresholds={"minutes": 1, "min_failures": 1})
    urls = [f"http://{a}/{p}" for p in ("", "a", "b")]
    args = ["crawl", *urls, "--allow-private", "--workers", "0", "--project", dead.name]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    dead_crawl = subprocess.Popen([sys.executable, "manage.py", *args], cwd=settings.BASE_DIR, env=env, **quiet)
    try:
        held = wait_until(
            lambda: Host.objects.filter(host=a, backoff_until__isnull=False).first(), timeout=60, what="the hold"
        )
        with SiteServer(small_site(4)) as server:
            summary = crawl(env, "live port", f"{server.url}/")
            last_request = max(t for t, _ in server.log)
    finally:
        dead_crawl.terminate()
        dead_crawl.wait(20)
    b = f"127.0.0.1:{server.port}"
    monitors_tick()
    alert = Alert.objects.get(project=dead, monitor__kind="site_down", resolved_at=None)
    ahead = held.backoff_until.timestamp() - last_request
    print(f"\nalert: {alert.message}\n{b} done {ahead:.1f} s before the end of {a}'s hold")
    assert alert.subject == f"host {a}" and f"{a} is down" in alert.message
    assert errors_grouped(dead, "host", top=5)[0][0] == a, "the dashboard's errors by host name the port"
    assert summary["pages_fetched"] == 5
    assert last_request < held.backoff_until.timestamp(), "the live port's pages did not wait for the dead port's hold"
    assert set(Page.objects.filter(project__name="live port").values_list("host", "attempts")) == {(b, 1)}
    assert Host.objects.get(host=b).backoff_until is None
    assert not Host.objects.filter(host="127.0.0.1").exists()


def test_grouping_by_ip_spaces_one_servers_two_names_by_the_delay(workers, worker_env):
    start(workers, worker_env)
    project_get_or_create(name="aliases", min_delay=1.0, politeness_group="ip", download_media=False)
    with SiteServer(small_site(2)) as server:
        summary = crawl(worker_env, "aliases", f"{server.url}/", f"http://localhost:{server.port}/")
        times = sorted(t for t, path in server.log if path != "/robots.txt")
    gaps = [b - a for a, b in itertools.pairwise(times)]
    hosts = set(Page.objects.filter(project__name="aliases").values_list("host", flat=True))
    print(f"\none server, two names, delay 1 s: {len(times)} requests, smallest gap {min(gaps):.3f} s")
    assert hosts == {f"127.0.0.1:{server.port}", f"localhost:{server.port}"}
    assert summary["pages_fetched"] == 6 and len(times) == 6
    assert min(gaps) >= 1.0, "the server never saw two requests closer than the delay"
