"""Retry a short database transaction that lost a deadlock or serialization race."""

import logging
import random
import time

from django.db import OperationalError, transaction

log = logging.getLogger("crawlhub.db")
ATTEMPTS = 4


def atomic_with_retry(work, *args, **kwargs):
    """Run work(*args, **kwargs) in a transaction, again (after a short random pause) if the
    database aborted it to break a deadlock; other errors propagate at once."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with transaction.atomic():
                return work(*args, **kwargs)
        except OperationalError as exc:
            if attempt == ATTEMPTS or not _is_retryable(exc):
                raise
            log.info("transaction aborted (%s); retry %d", exc.__class__.__name__, attempt)
            time.sleep(random.uniform(0.01, 0.1) * attempt)
    raise AssertionError("unreachable")


def _is_retryable(exc: OperationalError) -> bool:
    text = str(exc).lower()
    return "deadlock" in text or "could not serialize" in text or "database is locked" in text
