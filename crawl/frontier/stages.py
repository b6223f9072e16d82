"""The stage order (fetch -> extract -> download), the stage each state is owed to, and the
publishers that hand a stage its ids.

Only the frontier calls the publishers, always after the writes they depend on are committed. A
message is a wake-up call, never the truth: a lost one is republished by the reaper from the rows,
a duplicate claims nothing.
"""

from collections import defaultdict
from contextlib import contextmanager
from contextvars import ContextVar

from django.conf import settings
from django.db import transaction

from crawl.db import chunked
from crawlproject.celery import app

FETCH, EXTRACT, DOWNLOAD = "fetch", "extract", "download"

# What each pending state still owes, declared once: the reaper, resume, counts, the dashboard and
# the metrics read it from here.
PAGE_STAGE_OF_STATE = {"queued": FETCH, "leased": FETCH, "fetched": EXTRACT, "extracted": DOWNLOAD}
ASSET_STAGE_OF_STATE = {"queued": DOWNLOAD, "leased": DOWNLOAD}
PAGE_PENDING_STATES = tuple(PAGE_STAGE_OF_STATE)
ASSET_PENDING_STATES = tuple(ASSET_STAGE_OF_STATE)


# The job on whose behalf messages are published now: set by the console around the actions it
# starts, and inside a task from its message's `job` argument, so the messages a task publishes carry
# its job on (shown in Flower's arguments). Informational: a row's job is stamped from its project
# when claimed.
CURRENT_JOB: ContextVar[int | None] = ContextVar("crawlhub_job", default=None)


@contextmanager
def job_scope(job_id: int | None):
    token = CURRENT_JOB.set(job_id)
    try:
        yield
    finally:
        CURRENT_JOB.reset(token)


def _send(task_name: str, ids: list[int], batch: int, countdown: float) -> None:
    options = {"countdown": countdown} if countdown > 0 else {}
    job = CURRENT_JOB.get()
    if job is not None:
        options["kwargs"] = {"job": job}
    for chunk in chunked(ids, batch):
        app.send_task(task_name, args=[chunk], **options)


def publish_fetch(
    page_ids: list[int],
    hosts: dict[int, str] | None = None,
    rendered: set[int] | None = None,
    *,
    countdown: float = 0.0,
    batch: int | None = None,
) -> None:
    """Fetch batches grouped by host (one batch reuses its host's connections), in the order given
    (the frontier orders by priority); pages of projects that render JavaScript go to the render
    queue (`rendered`: those ids when the caller knows them, else looked up). `countdown`: the
    batch is a wake-up for work that becomes due then; `batch`: a smaller batch size."""
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
            _send("crawl.render_batch", ids, batch or settings.CRAWL_RENDER_BATCH, countdown)
        else:
            _send("crawl.fetch_batch", ids, batch or settings.CRAWL_FETCH_BATCH, countdown)


def publish_extract(page_ids: list[int], *, batch: int | None = None) -> None:
    _send("scrape.extract_batch", list(page_ids), batch or settings.CRAWL_EXTRACT_BATCH, 0.0)


def publish_download(asset_ids: list[int], *, countdown: float = 0.0, batch: int | None = None) -> None:
    _send("media.download_batch", list(asset_ids), batch or settings.CRAWL_DOWNLOAD_BATCH, countdown)


def after_commit(publish, ids, *args, **kwargs) -> None:
    """Publish once the surrounding transaction commits (at once when there is none), on behalf of
    the job current now."""
    if ids:
        ids, job = list(ids), CURRENT_JOB.get()

        def send():
            with job_scope(job):
                publish(ids, *args, **kwargs)

        transaction.on_commit(send)
