"""Settings for fault scenario 6: every task message is published twice.

The project's own settings plus one Celery signal handler: after each publish, the same task is
sent again with a marker header (so the copy is not copied). Every process of the scenario (the
crawl command and every worker) loads these settings, so every hand-off is duplicated.
"""

import os
import threading
from pathlib import Path

from celery.signals import after_task_publish

from crawlproject.settings import *  # noqa: F403

DUPLICATE_LOG = Path(os.environ["CRAWLHUB_DUPLICATE_LOG"])


_SENDING = threading.local()


@after_task_publish.connect(weak=False)
def publish_again(sender=None, headers=None, body=None, **kwargs):
    if (headers or {}).get("crawlhub_duplicate") or getattr(_SENDING, "active", False):
        return
    from crawlproject.celery import app

    args, task_kwargs, _embed = body
    _SENDING.active = True
    try:
        app.send_task(sender, args=args, kwargs=task_kwargs, headers={"crawlhub_duplicate": True})
    finally:
        _SENDING.active = False
    with open(DUPLICATE_LOG, "a") as log:
        log.write(f"{sender}\n")
