"""App config for crawl."""

from django.apps import AppConfig


class CrawlConfig(AppConfig):
    name = "crawl"
    verbose_name = "Crawl"
