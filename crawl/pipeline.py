"""The one module that knows the stage order: fetch -> extract -> download.

Stages hand each other batches of ids by task name (no imports between apps), always after the
writes they depend on are committed; a lost hand-off is picked up by the reaper.
"""

from collections import defaultdict

from django.conf import settings
from django.db import transaction

from crawlproject.celery import app

from .db import chunked


def _send(task_name: str, ids: list[int], batch: int) -> None:
    for chunk in chunked(sorted(ids), batch):
        app.send_task(task_name, args=[chunk])


def publish_fetch(page_ids: list[int], hosts: dict[int, str] | None = None, rendered: set[int] | None = None) -> None:
    """Publish fetch batches grouped by host (one batch reuses its host's connections); pages of
    projects that render JavaScript go to the render queue instead (`rendered`: those ids, when
    the caller knows them; else they are looked up)."""
    if not page_ids:
        return
    if rendered is None:
        from crawl.models import Page

        rendered = set(Page.objects.filter(id__in=page_ids, project__render_js=True).values_list("id", flat=True))
    by_host = defaultdict(list)
    for pid in page_ids:
        by_host[(pid in rendered, (hosts or {}).get(pid, ""))].append(pid)
    for (render, _host), ids in by_host.items():
        if render:
            _send("crawl.render_batch", ids, settings.CRAWL_RENDER_BATCH)
        else:
            _send("crawl.fetch_batch", ids, settings.CRAWL_FETCH_BATCH)


def publish_extract(page_ids: list[int]) -> None:
    _send("scrape.extract_batch", page_ids, settings.CRAWL_EXTRACT_BATCH)


def publish_download(asset_ids: list[int]) -> None:
    _send("media.download_batch", asset_ids, settings.CRAWL_DOWNLOAD_BATCH)


def on_commit(publish, ids, *args) -> None:
    """Publish once the surrounding transaction commits (at once when there is none)."""
    if ids:
        transaction.on_commit(lambda: publish(list(ids), *args))
