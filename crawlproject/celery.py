"""The one Celery app: configured from Django settings (CELERY_*), queues and routes from queues.py."""

import os

from celery import Celery
from kombu import Exchange, Queue

from . import broker, queues

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crawlproject.settings")

broker.install()  # redis:// uses the transport that survives a Redis restart
app = Celery("crawlhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue(name, Exchange(name, type="direct"), routing_key=name) for name in queues.QUEUES]
app.conf.task_default_queue = queues.FETCH
app.conf.task_routes = queues.TASK_ROUTES
app.autodiscover_tasks()
