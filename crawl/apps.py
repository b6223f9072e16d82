"""App config for crawl."""

from django.apps import AppConfig


class CrawlConfig(AppConfig):
    name = "crawl"
    verbose_name = "Crawl"

    def ready(self) -> None:
        from django.conf import settings

        from crawl import signals  # noqa: F401 - connects the schedule sync
        from crawl.connections import task_connections_connect
        from crawl.logging import structlog_configure, task_context_connect
        from crawl.netguard import allow_networks
        from crawl.sqlcount import sqlcount_install

        allow_networks(settings.CRAWL_ALLOWED_NETWORKS)
        structlog_configure(log_format=settings.CRAWLHUB_LOG_FORMAT)
        task_context_connect()
        task_connections_connect()
        sqlcount_install()  # the benchmark's statement counts; nothing unless CRAWLHUB_SQL_COUNT_DIR is set
