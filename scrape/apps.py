"""App config for scrape."""

from django.apps import AppConfig


class ScrapeConfig(AppConfig):
    name = "scrape"
    verbose_name = "Extraction"
