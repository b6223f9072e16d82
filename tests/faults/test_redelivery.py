"""Fault suite, scenario 6: every message delivered twice, then a whole queue's history replayed."""

from pathlib import Path

import pytest

from crawl.models import MediaAsset, Page
from crawlproject.celery import app
from scrape.models import Item
from tests.faults.harness import TIMEOUT, FaultCrawl, assert_queues_drain, assert_tasks_finish, site_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(TIMEOUT)]


def received(log_dir: Path) -> int:
    return sum(p.read_text(errors="replace").count("] received") for p in log_dir.glob("*.log"))


def test_6_every_message_twice_and_a_replayed_queue_change_nothing(workers, worker_env, tmp_path):
    duplicates = tmp_path / "duplicates.txt"
    env = worker_env | {
        "DJANGO_SETTINGS_MODULE": "tests.faults.duplicating_settings",
        "CRAWLHUB_DUPLICATE_LOG": str(duplicates),
    }
    site = site_of(quick=80, full=2000)
    with FaultCrawl("6 every message twice, then a queue replayed", site, workers, env, tmp_path) as run:
        run.start_workers()
        run.start()
        run.finish()
        figures = run.ledger()
        sent_twice = len(duplicates.read_text().splitlines())
        assert sent_twice > 0
        assert received(tmp_path) >= 2 * sent_twice - 5  # (a copy may still be on its way at the end)

        # Replay: every fetch, extract and download message the crawl could ever have sent, at once.
        before = _snapshot(run.project)
        requests_before = len(run.server.paths())
        page_ids = list(Page.objects.filter(project__slug=run.project).values_list("id", flat=True))
        asset_ids = list(MediaAsset.objects.filter(project__slug=run.project).values_list("id", flat=True))
        for start in range(0, len(page_ids), 10):
            app.send_task("crawl.fetch_batch", args=[page_ids[start : start + 10]])
            app.send_task("scrape.extract_batch", args=[page_ids[start : start + 10]])
        for start in range(0, len(asset_ids), 5):
            app.send_task("media.download_batch", args=[asset_ids[start : start + 5]])
        assert_queues_drain(run.env["CELERY_BROKER_URL"], timeout=120)
        assert_tasks_finish(run.env["CELERY_BROKER_URL"])  # the last replayed tasks have ended, not begun
        replayed = len(run.server.paths()) - requests_before
        after = _snapshot(run.project)
    print(f"duplicated messages: {sent_twice}; replayed {len(page_ids)} pages, {len(asset_ids)} assets")
    assert figures.extra_fetches == 0
    assert replayed == 0, "a replayed message fetched a finished page again"
    assert after == before


def _snapshot(project: str) -> tuple:
    pages = Page.objects.filter(project__slug=project)
    return (
        sorted(pages.values_list("url", "state", "content_sha256", "fetch_count", "updated_at")),
        Item.objects.filter(page__project__slug=project).count(),
        sorted(MediaAsset.objects.filter(project__slug=project).values_list("url", "state", "sha256", "updated_at")),
    )
