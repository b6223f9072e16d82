"""celery beat's scheduler with a heartbeat: django-celery-beat's DatabaseScheduler, which writes
each task's last_run_at only every few minutes, plus a row its own tick refreshes, so the console
knows within seconds whether a scheduler runs."""

import contextlib
import os
import socket
import time

from django.db import close_old_connections
from django.utils import timezone
from django_celery_beat.schedulers import DatabaseScheduler

HEARTBEAT_NAME = f"celery-beat@{socket.gethostname()}"
HEARTBEAT_EVERY_SECONDS = 10.0


class HeartbeatScheduler(DatabaseScheduler):
    _beat_written = float("-inf")

    def tick(self, *args, **kwargs):
        interval = super().tick(*args, **kwargs)
        if time.monotonic() - self._beat_written >= HEARTBEAT_EVERY_SECONDS:
            self._beat_written = time.monotonic()
            close_old_connections()  # beat lives for weeks: a connection the database dropped is replaced
            scheduler_heartbeat()
        return interval


def scheduler_heartbeat() -> None:
    """Beat is alive now (a row without queues: not a worker). A failed write is skipped: the
    schedule matters more than the console's knowing of it."""
    from console.models import WorkerBeat

    with contextlib.suppress(Exception):
        WorkerBeat.objects.update_or_create(
            name=HEARTBEAT_NAME, defaults={"queues": "", "pid": os.getpid(), "seen_at": timezone.now()}
        )
