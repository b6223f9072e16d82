"""App config for scrape."""

from django.apps import AppConfig


class ScrapeConfig(AppConfig):
    name = "scrape"
    verbose_name = "Extraction"

    def ready(self) -> None:
        from crawl.signals import request_signer

        from .hooks import spider_signer

        request_signer.connect(spider_signer, dispatch_uid="scrape.spider_signer")
