"""Database connections kept across Celery tasks, and replaced when they broke.

Workers keep their connections for many tasks (CELERY_DB_REUSE_MAX), so Celery's Django fixup no
longer closes them between tasks. A connection broken by a database restart would then be reused
by every later task of the process ("the connection is closed"), so before each task any
connection that saw an error is checked and dropped if unusable, and the next query reconnects.

The stage tasks (fetch, render, extract, download) commit without waiting for PostgreSQL to flush
its log to disk: a PostgreSQL crash (not a restart, which flushes) may take back their last
fraction of a second of commits, always a prefix-consistent state whose work the leases hand out
again. Transactions a reader must never see taken back (the versions the change feed serves by
id) commit durably all the same (core/batchsql.py commit_order_lock).
"""

from celery import signals
from django.db import DatabaseError, connections


def connections_refresh(**_) -> None:
    """Close the connections that saw an error and no longer answer (the others are kept)."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is None or not connection.errors_occurred or connection.in_atomic_block:
            continue
        if connection.is_usable():
            connection.errors_occurred = False
        else:
            connection.close()


def task_connections_connect() -> None:
    """Run connections_refresh before and after every task (called once, from ready())."""
    signals.task_prerun.connect(connections_refresh, dispatch_uid="crawlhub.db.refresh.pre", weak=False)
    signals.task_postrun.connect(connections_refresh, dispatch_uid="crawlhub.db.refresh.post", weak=False)
    signals.task_prerun.connect(stage_commits, dispatch_uid="crawlhub.db.commits", weak=False)


def stage_commits(*, task=None, **_) -> None:
    """Before each task: the stage tasks' transactions commit without waiting for the disk
    (CRAWL_STAGE_SYNCHRONOUS_COMMIT off), every other task's wait as usual. PostgreSQL only."""
    from django.conf import settings

    from crawlproject.queues import STAGE_TASKS

    connection = connections["default"]
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return
    fast = getattr(task, "name", "") in STAGE_TASKS and not settings.CRAWL_STAGE_SYNCHRONOUS_COMMIT
    try:
        with connection.cursor() as cursor:
            cursor.execute("SET synchronous_commit TO " + ("off" if fast else "on"))
    except DatabaseError:  # the database is away: the task meets it and rides it out as before
        pass
