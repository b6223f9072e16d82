"""The fetch stage's entry: a wake-up (or the reaper's pages) runs a fetch session, or one round."""

from datetime import datetime

from crawl.frontier.pages import backlog_recount
from crawl.frontier.stages import FETCH, RENDER, wake_stage
from crawl.frontier.wakeups import wakeup_taken
from crawlproject.queues import STAGES

from .loop import session_run
from .rounds import claim_round, round_fetch, round_prepare, wake_for_next


def pages_fetch(*, page_ids: list[int], worker: str = "", render: bool = False, wake: str | None = None) -> list[int]:
    """Claim the pages that are ready now across hosts and projects (in headless Chromium when
    `render`), fetch them all at once, and record each result; return the ids now `fetched` (the
    frontier hands them to the extract stage). `page_ids`: exactly those pages (the reaper's, one
    at a time); empty: a wake-up (booked for `wake`, an ISO time), which takes whatever is ready,
    and, when no other process of the worker does, keeps taking it for a while (loop.py).
    Outside a session a claim books no slot ahead, so no process waits for one: a polite host's
    later slots are the session's."""
    queue = RENDER if render else FETCH
    if wake:
        wakeup_taken(queue, datetime.fromisoformat(wake))
        backlog_recount()  # an extract batch that resumed fetching sent this wake-up: look again now
    if not page_ids and not render:
        fetched = session_run(worker)
        if fetched is not None:
            return fetched
    limit = STAGES[RENDER if render else FETCH].batch()
    token, pages, grants, full = claim_round(page_ids, limit, render, worker)
    if full:  # more may be ready: another worker process claims it while this one fetches
        wake_stage(queue)
    fetched = round_fetch(round_prepare(pages, grants, token, worker), render) if pages else []
    wake_for_next(render, claimed=bool(pages))
    return fetched
