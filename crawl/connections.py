"""Database connections kept across Celery tasks, and replaced when they broke.

Workers keep their connections for many tasks (CELERY_DB_REUSE_MAX), so Celery's Django fixup no
longer closes them between tasks. A connection broken by a database restart would then be reused
by every later task of the process ("the connection is closed"), so before each task any
connection that saw an error is checked and dropped if unusable, and the next query reconnects.
"""

from celery import signals
from django.db import connections


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
