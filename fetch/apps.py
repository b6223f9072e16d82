"""App config for fetch (no models: its rows are the crawl app's; Celery finds its tasks here)."""

from django.apps import AppConfig


class FetchConfig(AppConfig):
    name = "fetch"
    verbose_name = "Fetch"

    def ready(self) -> None:
        from celery.signals import worker_process_shutdown

        from .session_pool import pool_counts_flush

        # A pool process leaves with os._exit: what it gathered of its sessions' uses is written first.
        worker_process_shutdown.connect(pool_counts_flush, weak=False, dispatch_uid="crawlhub-session-counts")
