"""App config for sinks."""

from django.apps import AppConfig


class SinksConfig(AppConfig):
    name = "sinks"
    verbose_name = "Result sinks"

    def ready(self) -> None:
        from crawl.results import assets_stored, pages_extracted

        from .records import assets_offer, results_offer

        pages_extracted.connect(results_offer, dispatch_uid="sinks.results_offer")
        assets_stored.connect(assets_offer, dispatch_uid="sinks.assets_offer")
