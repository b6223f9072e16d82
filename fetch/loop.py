"""A fetch session: one worker process keeps claiming and fetching the pages that become ready, for
up to CRAWL_FETCH_SESSION_SECONDS. Its requests go out at their hosts' slots on the process's event loop thread
while this thread claims the next round and writes the results of the rounds that are done, so a
slot is never missed because a task was waiting for a pool process. One process at a time holds the
worker's session (a StageWakeup row per Celery worker, until the session's end: a killed holder
frees it then); wake-ups that reach the worker's other processes leave the work to it.
"""

import concurrent.futures
import time
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from crawl.frontier.pages import pages_next_due
from crawl.frontier.stages import FETCH, wake_stage
from crawl.frontier.wakeups import session_leave, session_take
from crawl.hosts.politeness import GRANT_AHEAD_SECONDS

from .rounds import claim_round, parts_finish, round_prepare, round_start, wake_for_next

TICK_SECONDS = 0.1
# Rounds in flight at once, in fetch batches (CRAWL_FETCH_BATCH): a round's requests wait for their
# slots on the event loop, so many hosts' requests are open at once.
IN_FLIGHT_BATCHES = 8
IDLE_END_SECONDS = 3.0  # nothing due sooner than this: the session ends, a booked wake-up comes back


def session_run(worker: str) -> list[int] | None:
    """Run this worker's fetch session in this process; the ids now `fetched`, or None when another
    of the worker's processes runs it (that one claims what is ready: a second would only race it
    for the same hosts' slots)."""
    seconds = settings.CRAWL_FETCH_SESSION_SECONDS
    end, key = timezone.now() + timedelta(seconds=seconds), f"{FETCH}@{worker}"
    if seconds <= 0 or not session_take(key, end):
        return None
    try:
        return _session(worker, time.monotonic() + seconds)
    finally:
        session_leave(key, end)
        wake_for_next(False, claimed=True)


def _session(worker: str, deadline: float) -> list[int]:
    running: list[tuple] = []  # (round, part, future of its responses)
    fetched: list[int] = []
    batch, limit = settings.CRAWL_FETCH_BATCH, settings.CRAWL_FETCH_BATCH * IN_FLIGHT_BATCHES
    while True:
        in_flight = sum(len(part.pages) for _, part, _ in running)
        if time.monotonic() < deadline and in_flight < limit:
            token, pages, grants, full = claim_round(
                [], min(batch, limit - in_flight), False, worker, ahead=GRANT_AHEAD_SECONDS
            )
            if full:  # more is ready than one round: the worker's other processes take rounds too
                wake_stage(FETCH)
            if pages:
                fetch_round = round_prepare(pages, grants, token, worker)
                running += [(fetch_round, part, future) for part, future in round_start(fetch_round, render=False)]
        if not running:
            if time.monotonic() >= deadline or not _due_soon():
                return fetched
            time.sleep(TICK_SECONDS)
            continue
        futures = [future for _, _, future in running]
        done, _ = concurrent.futures.wait(futures, timeout=TICK_SECONDS, return_when="FIRST_COMPLETED")
        finished = [entry for entry in running if entry[2] in done]  # all that came in meanwhile, together
        running = [entry for entry in running if entry[2] not in done]
        if finished:
            fetched += parts_finish(finished)


def _due_soon() -> bool:
    due = pages_next_due(render=False)
    return due is not None and (due - timezone.now()).total_seconds() < IDLE_END_SECONDS
