"""The pipeline's health figures, told to whoever keeps them (the console's rolling counters):
counts of what one batch did, keyed by (scope, key, metric), sent once the batch's rows commit.

Scopes: "project" (key ""), "host" (key: the host name) and "rules" (key: a rule set's item kind).
Metrics: fetch_ok, fetch_failed (unreachable, timed out, 5xx), fetch_other (another error: 404,
robots...), fetch_blocked (a block page), fetch_backoff (the host asked us to wait), error:<code>,
pages_extracted, new_items, changed_items; for a rule set: pages (it applied to), items,
field:<name> (items with the field).
"""

import logging
from collections import Counter

from django.db import transaction
from django.dispatch import Signal

log = logging.getLogger("crawlhub.health")

# kwargs: project_id, counts (a Counter of (scope, key, metric) -> n). Sent after the commit.
health_counted = Signal()


def health_count(project_id: int, counts: Counter) -> None:
    """Tell the receivers once the current transaction commits (never when it rolls back); a
    receiver's failure is logged, never raised into the stage."""
    if counts and health_counted.has_listeners():
        transaction.on_commit(lambda: _send(project_id, counts))


def _send(project_id: int, counts: Counter) -> None:
    for _receiver, result in health_counted.send_robust(sender=None, project_id=project_id, counts=counts):
        if isinstance(result, Exception):
            log.info("health counters not written: %r", result)
