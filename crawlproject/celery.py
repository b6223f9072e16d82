"""The one Celery app: configured from Django settings (CELERY_*), queues from queues.py, routes from
control_tasks.py."""

import gc
import os

from celery import Celery
from celery.signals import worker_process_init
from kombu import Exchange, Queue

from . import broker, control_tasks, queues, workerqueues  # noqa: F401 - workerqueues: every worker takes control

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crawlproject.settings")
# Celery runs Django's system checks as a worker starts: they import the URLs, the admin, the API and
# the migration autodetector, half a second of every start, for nothing a worker uses (`manage.py check`,
# migrate and serve still run them). CELERY_SKIP_CHECKS= (empty) brings them back.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

broker.install()  # redis:// uses the transport that survives a Redis restart
app = Celery("crawlhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue(name, Exchange(name, type="direct"), routing_key=name) for name in queues.QUEUES]
app.conf.task_default_queue = queues.FETCH
app.conf.task_routes = control_tasks.TASK_ROUTES
app.autodiscover_tasks()


GC_FIRST_GENERATION = 10_000  # allocations between collections of the youngest objects (Python's default: 700)


@worker_process_init.connect(weak=False)
def _gc_settle(**_kwargs) -> None:
    """A pool process keeps what it imported for its whole life: frozen, the cyclic collector never
    walks it again, and a larger first generation makes collections rarer (the stages allocate
    many short-lived objects per page and almost no cycles)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_FIRST_GENERATION, 20, 20)
