"""App config for fetch (no models: its rows are the crawl app's; Celery finds its tasks here)."""

from django.apps import AppConfig


class FetchConfig(AppConfig):
    name = "fetch"
    verbose_name = "Fetch"
