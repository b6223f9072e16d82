"""The crawl command as a newcomer meets it on the embedded default: a crawl run again after a
refusal or an outage tries again, a run with nothing to do says so, its times are the work's."""

import io
import json
import os

import pytest
from django.core.management import CommandError, call_command

from console.management.commands._crawl_summary import report_lines
from console.models import Job
from crawl.models import Project
from tests.conftest import last_json_line, migrate_embedded, run_manage
from tests.helpers import free_port
from tests.servers import Site, SiteServer

pytestmark = pytest.mark.integration

HTML = {"Content-Type": "text/html; charset=utf-8"}


def small_site() -> Site:
    page = lambda links: (200, HTML, "".join(f'<a href="{u}">{u}</a>' for u in links).encode())  # noqa: E731
    return Site(files={"/": page(["/a", "/b"]), "/a": page(["/b"]), "/b": page(["/"])})


@pytest.fixture
def embedded_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env |= {"CRAWLHUB_VAR_DIR": str(tmp_path / "var"), "DJANGO_SETTINGS_MODULE": "crawlproject.settings"}
    env |= {"CRAWL_MAX_ATTEMPTS": "1"}  # a failure is final at once: no back-off to wait out
    migrate_embedded(env)
    return env


def crawl(env: dict, *args: str) -> tuple[int, dict, str]:
    done = run_manage(["crawl", *args, "--json", "--timeout", "120"], env)
    return done.returncode, last_json_line(done.stdout), done.stdout + done.stderr


def test_a_refused_seed_is_crawled_when_the_crawl_is_run_again_with_the_flag_it_names(embedded_env):
    with SiteServer(small_site()) as server:
        code, refused, output = crawl(embedded_env, f"{server.url}/", "--project", "t1")
        assert code == 1 and "--allow-private" in output and refused["errors"] == {"blocked_address": 1}
        code, again, output = crawl(embedded_env, f"{server.url}/", "--project", "t1", "--allow-private")
    assert code == 0, output
    assert (again["state"], again["pages_fetched"], again["pages_failed"]) == ("succeeded", 3, 0)
    assert sorted(server.paths()) == ["/", "/a", "/b", "/robots.txt"]


def test_a_seed_whose_site_was_down_is_crawled_when_the_crawl_is_run_again(embedded_env):
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    code, down, output = crawl(embedded_env, url, "--project", "down", "--allow-private")
    assert code == 1 and down["state"] == "failed" and down["pages_fetched"] == 0, output
    with SiteServer(small_site(), port=port):
        code, back, output = crawl(embedded_env, url, "--project", "down")
    assert code == 0, output
    assert (back["state"], back["pages_fetched"], back["pages_failed"]) == ("succeeded", 3, 0)


def test_a_run_that_fetched_nothing_says_so_and_how_to_fetch_again_not_succeeded(embedded_env):
    with SiteServer(small_site()) as server:
        code, first, output = crawl(embedded_env, f"{server.url}/", "--project", "again", "--allow-private")
        assert code == 0 and first["pages_fetched"] == 3, output
        code, again, output = crawl(embedded_env, f"{server.url}/", "--project", "again")
    assert code == 0, output
    line = output.splitlines()[0]
    assert again["nothing_to_do"] is True and (again["pages_fetched"], again["pages_failed"]) == (0, 0)
    assert "succeeded" not in line and "pages/s" not in line
    assert "nothing to crawl" in line and "3 done, 0 failed by earlier runs" in line and "--recrawl" in line


def test_the_summarys_time_and_rate_are_the_jobs_own(embedded_env):
    with SiteServer(small_site()) as server:
        code, summary, output = crawl(embedded_env, f"{server.url}/", "--project", "timed", "--allow-private")
    assert code == 0, output
    listed = run_manage(["jobs", "timed", "--json"], embedded_env)
    job = json.loads(listed.stdout.splitlines()[0])
    assert job["id"] == summary["job"] and job["started_at"] and job["finished_at"]
    assert (summary["seconds"], summary["pages_per_second"]) == (
        job["counts"]["seconds"],
        job["counts"]["pages_per_second"],
    )
    assert f"in {summary['seconds']} s ({summary['pages_per_second']:.1f} pages/s)" in output


def test_a_distributed_crawl_with_no_worker_says_so_within_seconds(transactional_db, broker, admin_client):
    err = io.StringIO()
    with SiteServer(small_site()) as server, pytest.raises(CommandError, match="stopped waiting"):
        call_command("crawl", f"{server.url}/", "--allow-private", "--workers", "0", "--timeout", "4", stderr=err)
    assert "waiting: 1 rows owe the fetch stage and no worker consumes the 'fetch' queue" in err.getvalue()
    progress = admin_client.get(f"/api/projects/127001-{server.port}/progress/").json()
    assert any("no worker consumes the 'fetch' queue" in w for w in progress["warnings"]), progress


def test_an_interrupted_embedded_crawl_is_paused_left_alone_by_others_and_resumed_by_the_same_command(
    embedded_env,
):
    with SiteServer(small_site(), delay=1.0) as a, SiteServer(small_site()) as b:
        stopped = run_manage(
            ["crawl", f"{a.url}/", "--project", "a", "--allow-private", "--timeout", "2"], embedded_env
        )
        assert stopped.returncode == 1
        assert "timed out: job 1 of a is paused; run the same command again to resume it" in stopped.stderr
        listed = json.loads(run_manage(["jobs", "a", "--json"], embedded_env).stdout.splitlines()[0])
        assert listed["state"] == "paused", "no worker is left to run it"
        seen_by_a = len(a.paths())
        code, other, output = crawl(embedded_env, f"{b.url}/", "--project", "b", "--allow-private")
        assert code == 0 and other["pages_fetched"] == 3, output
        assert len(a.paths()) == seen_by_a, "another project's crawl left the paused one's pages alone"
        code, resumed, output = crawl(embedded_env, f"{a.url}/", "--project", "a")
    assert code == 0, output
    assert "resumed the paused job 1 of project a" in output
    assert (resumed["job"], resumed["state"], resumed["pages_fetched"]) == (1, "succeeded", 3)


def test_a_distributed_crawl_that_stops_waiting_says_the_workers_go_on(transactional_db, broker):
    with SiteServer(small_site()) as server, pytest.raises(CommandError) as stopped:
        call_command("crawl", f"{server.url}/", "--allow-private", "--workers", "0", "--timeout", "1", "--project", "d")
    job = Job.objects.get(project__slug="d")
    assert str(stopped.value) == (
        f"timed out: stopped waiting, but job {job.id} of d goes on in the workers "
        "(`manage.py jobs d` shows it, `manage.py pause d` pauses it)"
    )


def test_a_host_without_a_scheme_is_refused_up_front_with_the_url_it_may_mean(db):
    with pytest.raises(CommandError) as refused:
        call_command("crawl", "example.com", "--project", "t1")
    assert str(refused.value) == "not a URL that can be crawled: 'example.com' (try https://example.com/)"
    with pytest.raises(CommandError, match=r"'htp:/nonsense' \(try https://example.com/\)"):
        call_command("crawl", "htp:/nonsense")
    assert not Job.objects.exists() and not Project.objects.exists(), "no project, no failed job"


def test_seeds_refused_before_any_fetch_print_no_rate():
    summary = {"project": "refused", "job": 1, "state": "failed", "pages_fetched": 0, "pages_not_parsed": 0,
               "pages_failed": 2, "assets": 0, "assets_failed": 0, "seconds": 0.11, "pages_per_second": 18.2,
               "errors": {"blocked_address": 2}, "asset_errors": {}, "sinks": {}, "nothing_to_do": False}  # fmt: skip
    line = report_lines(summary)[0]
    assert line == "refused job 1 failed: 0 pages done, 2 failed, 0 assets stored (0 failed)"
    assert "pages/s" in report_lines(summary | {"pages_fetched": 1})[0]
