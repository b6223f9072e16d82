"""The stage order (fetch -> extract -> download), the stage each state is owed to, and the
publishers that wake a stage up.

Only the frontier calls the publishers, always after the writes they depend on are committed. A
message is a wake-up call, never the truth: every stage claims what is ready from the rows, so a
lost one costs the next wake-up (the reaper books one when ready work waits), a duplicate claims
nothing.
"""

from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.batchsql import chunked
from crawlproject.jobcontext import CURRENT_JOB, job_scope
from crawlproject.queues import DOWNLOAD, EXTRACT, FETCH, RENDER, STAGES

# What each pending state still owes, declared once: the reaper, resume, counts, the dashboard and
# the metrics read it from here.
PAGE_STAGE_OF_STATE = {"queued": FETCH, "leased": FETCH, "fetched": EXTRACT, "extracted": DOWNLOAD}
ASSET_STAGE_OF_STATE = {"queued": DOWNLOAD, "leased": DOWNLOAD}
PAGE_PENDING_STATES = tuple(PAGE_STAGE_OF_STATE)
ASSET_PENDING_STATES = tuple(ASSET_STAGE_OF_STATE)


def page_renders(project_renders: bool, request: dict) -> bool:
    """Whether a page goes to the render stage: its request's `render` (a spider's Request(render=)),
    else its project's render_js."""
    own = request.get("render") if request else None
    return project_renders if own is None else bool(own)


def stage_rows(render: bool, *, project_renders: bool | None = None) -> Q:
    """The pages owed to the render stage (`render`) or to the fetch stage: their request's choice,
    else their project's (`project_renders` when the caller knows it: one project's rows)."""
    own = Q(request__has_key="render") & Q(request__render=render)
    if project_renders is None:
        return own | (~Q(request__has_key="render") & Q(project__render_js=render))
    return (~Q(request__has_key="render") | own) if project_renders == render else own


def _send(stage: str, ids: list[int], batch: int, countdown: float) -> None:
    options = {"countdown": countdown} if countdown > 0 else {}
    job = CURRENT_JOB.get()
    if job is not None:
        options["kwargs"] = {"job": job}
    for chunk in chunked(ids, batch):
        current_app.send_task(STAGES[stage].task, args=[chunk], **options)


def publish_fetch(
    page_ids: list[int],
    hosts: dict[int, str] | None = None,
    rendered: set[int] | None = None,
    *,
    countdown: float = 0.0,
    batch: int | None = None,
) -> None:
    """Wake the fetch stage for these pages (the render stage for pages of projects that render
    JavaScript), now or in `countdown` seconds. The rows are the queue: a wake-up carries no ids,
    and the worker it reaches claims whatever is ready then, across hosts and projects
    (fetch/rounds.py). `batch=1` is the reaper's: pages a dead worker held among others
    go out one id per message, claimed alone, so a page that kills its worker fails alone."""
    if not page_ids:
        return
    if rendered is None:
        from crawl.models import Page

        rendered = set(Page.objects.filter(stage_rows(True), id__in=page_ids).values_list("id", flat=True))
    render_ids = [pid for pid in page_ids if pid in rendered]
    plain_ids = [pid for pid in page_ids if pid not in rendered]
    if batch == 1:
        _send(RENDER, render_ids, 1, countdown)
        _send(FETCH, plain_ids, 1, countdown)
        return
    if render_ids:
        wake_stage(RENDER, countdown=countdown)
    if plain_ids:
        wake_stage(FETCH, countdown=countdown)


def wake_stage(queue: str, *, countdown: float = 0.0) -> bool:
    """One wake-up for a pulling stage's queue in `countdown` seconds, unless one is already on its
    way by then. Waits longer than CRAWL_WAKEUP_MAX_SECONDS carry no message (the reaper wakes the
    stage once they are due). Returns whether a message was sent."""
    from .wakeups import wakeup_book

    countdown = max(0.0, countdown)
    if countdown > settings.CRAWL_WAKEUP_MAX_SECONDS:
        return False
    now = timezone.now()
    at = now + timedelta(seconds=countdown)
    if not wakeup_book(queue, at, now):
        return False
    options = {"countdown": round(countdown, 2)} if countdown > 0 else {}
    current_app.send_task(STAGES[queue].task, args=[[]], kwargs={"wake": at.isoformat()}, **options)
    return True


def publish_extract(page_ids: list[int], *, batch: int | None = None) -> None:
    """Wake the extract stage for these fetched pages: like fetch, it claims whatever is ready
    (scrape/services.py). `batch=1` is the reaper's: pages a dead worker held among others go out
    one id per message, claimed alone."""
    if batch == 1:
        _send(EXTRACT, list(page_ids), 1, 0.0)
    elif page_ids:
        wake_stage(EXTRACT)


def publish_download(asset_ids: list[int], *, countdown: float = 0.0, batch: int | None = None) -> None:
    """Wake the download stage for these queued assets, now or in `countdown` seconds: it claims
    whatever is ready (media/services.py). `batch=1` is the reaper's, one id per message."""
    if batch == 1:
        _send(DOWNLOAD, list(asset_ids), 1, countdown)
    elif asset_ids:
        wake_stage(DOWNLOAD, countdown=countdown)


def after_commit(publish, ids, *args, **kwargs) -> None:
    """Publish once the surrounding transaction commits (at once when there is none), on behalf of
    the job current now."""
    if ids:
        ids, job = list(ids), CURRENT_JOB.get()

        def send():
            with job_scope(job):
                publish(ids, *args, **kwargs)

        transaction.on_commit(send)
