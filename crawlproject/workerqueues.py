"""Every worker consumes the control queue, whatever its -Q says: the reaper, the jobs tick (which
ends jobs), the sinks tick and the pruning ride it, and with nobody on it a job stays `running`
for ever. `-X control` (Celery's own --exclude-queues) is the explicit way to leave it out; such a
worker says in its log that another one must take it, and the console warns while none does."""

import logging

from celery.signals import celeryd_after_setup, celeryd_init
from celery.utils.text import str_to_list

from crawlproject.queues import CONTROL

log = logging.getLogger("crawlhub.workers")
_excluded: set[str] = set()


@celeryd_init.connect(weak=False, dispatch_uid="crawlproject.worker_options")
def _remember_exclusions(options=None, **kwargs) -> None:
    _excluded.clear()
    _excluded.update(str_to_list((options or {}).get("exclude_queues") or []))


@celeryd_after_setup.connect(weak=False, dispatch_uid="crawlproject.worker_control_queue")
def control_queue_add(sender=None, instance=None, **kwargs) -> bool:
    """Add the control queue to the worker's queues unless it was excluded; True if added now."""
    queues = instance.app.amqp.queues
    if CONTROL in _excluded:
        log.warning(
            "this worker does not consume the '%s' queue (-X %s): another worker must, or jobs never end "
            "and expired leases are never handed back",
            CONTROL,
            CONTROL,
        )
        return False
    if CONTROL in queues.consume_from:
        return False
    queues.select_add(queues[CONTROL])  # its own declaration (exchange "control"), not a default one
    log.info(
        "this worker consumes the '%s' queue too (housekeeping: reaper, job ends); -X %s leaves it out",
        CONTROL,
        CONTROL,
    )
    return True
