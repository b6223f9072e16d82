"""Distributed mode: PostgreSQL + Redis, one real `celery worker -Q <stage>` process per queue."""

import os
import subprocess
import sys
from collections import Counter

import pytest

from bench.check import assert_complete, ledger_key
from crawl.models import MediaAsset, Page
from scrape.models import Item
from tests.conftest import BASE_DIR, beat_stop, export_pages, last_json_line, migrate_embedded, run_manage
from tests.helpers import wait_until
from tests.servers import SiteServer

pytestmark = pytest.mark.integration


def start_stage_workers(workers) -> None:
    for stage in ("fetch", "extract", "download"):
        workers.start(stage, stage)


def crawl_args(url: str, project: str) -> list[str]:
    return ["crawl", f"{url}/", "--allow-private", "--json", "--workers", "0", "--project", project, "--timeout", "240"]


def test_it_runs_each_stage_on_its_own_queue_with_the_embedded_results(
    truth, site_server, workers, worker_env, tmp_path
):
    start_stage_workers(workers)
    done = run_manage(crawl_args(site_server.url, "dist"), worker_env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert last_json_line(done.stdout)["completed"] is True
    rows = export_pages(worker_env, "dist")
    assert_complete(rows, truth, site_server.paths())

    pages = Page.objects.filter(project__slug="dist")
    assert set(pages.exclude(fetched_by="").values_list("fetched_by", flat=True)) == {f"fetch@{os.uname().nodename}"}
    assert {w.split("@")[0] for w in pages.exclude(extracted_by="").values_list("extracted_by", flat=True)} == {
        "extract"
    }
    assets = MediaAsset.objects.filter(project__slug="dist")
    assert assets.count() == truth["media_count"]
    assert {a.split("@")[0] for a in assets.values_list("downloaded_by", flat=True)} == {"download"}

    embedded_env = {k: v for k, v in worker_env.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    embedded_env["CRAWLHUB_VAR_DIR"] = str(tmp_path / "embedded")
    migrate_embedded(embedded_env)
    embedded = run_manage(["crawl", f"{site_server.url}/", "--allow-private", "--project", "emb"], embedded_env)
    assert embedded.returncode == 0, embedded.stderr
    assert ledger_key(export_pages(embedded_env, "emb")) == ledger_key(rows)


def test_it_completes_without_loss_after_a_fetch_worker_is_killed(site, truth, workers, worker_env):
    with SiteServer.generated(site, delay=0.1) as server:
        start_stage_workers(workers)
        crawl = subprocess.Popen(
            [sys.executable, "manage.py", *crawl_args(server.url, "kill")],
            cwd=BASE_DIR,
            env=worker_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _wait_for(lambda: Page.objects.filter(project__slug="kill", state="done").count() >= 40, crawl)
        workers.kill("fetch")  # SIGKILL the whole worker: main process and pool children
        in_flight = Page.objects.filter(project__slug="kill", state="leased").count()
        workers.start("fetch2", "fetch")
        out, err = crawl.communicate(timeout=280)
        assert crawl.returncode == 0, out + err
        rows = export_pages(worker_env, "kill")
        assert_complete(rows, truth, server.paths())

    fetches = Counter(server.paths())
    extra = sum(n - 1 for path, n in fetches.items() if path in truth["pages"])
    print(f"\nkill test: {len(rows)} rows, {in_flight} leased at the kill, {extra} extra fetches")
    assert extra <= 2 * 50, "more refetches than the killed worker could have had in flight"
    assert Item.objects.filter(page__project__slug="kill").count() == truth["n_pages"]


def _wait_for(condition, proc, timeout: float = 120) -> None:
    def progressed() -> bool:
        if condition():
            return True
        assert proc.poll() is None, "the crawl ended before the fault could be injected"
        return False

    wait_until(progressed, timeout=timeout, what="the crawl to progress")


def test_it_recovers_a_dead_workers_lease_through_beat_alone(site, site_server, workers, worker_env):
    """No crawl command waiting: beat's periodic crawl.reap must bring the abandoned work back."""
    from datetime import timedelta

    from django.utils import timezone

    from crawl.services.projects import project_get_or_create, seeds_add

    project = project_get_or_create(name="beat", allow_private=True, max_depth=1)
    seeds_add(project=project, urls=[f"{site_server.url}/"])  # rows only: the message is "lost"
    Page.objects.filter(project=project).update(
        state="leased",
        attempts=1,
        lease_expires_at=timezone.now() - timedelta(seconds=1),
        enqueued_at=timezone.now() - timedelta(hours=1),
    )
    start_stage_workers(workers)
    beat_env = worker_env | {"CRAWL_REAP_INTERVAL_SECONDS": "1"}
    beat = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "crawlproject", "beat", "-l", "INFO"],
        cwd=BASE_DIR,
        env=beat_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        done = Page.objects.filter(project=project, state="done")
        wait_until(lambda: done.count() >= 9, timeout=90, interval=0.5, what="beat's reaper to bring the work back")
    finally:
        beat_stop(beat)
    seed = Page.objects.get(project=project, depth=0)
    assert (seed.state, seed.fetched_by.split("@")[0]) == ("done", "fetch")
