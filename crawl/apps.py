"""App config for crawl."""

import os

from django.apps import AppConfig


class CrawlConfig(AppConfig):
    name = "crawl"
    verbose_name = "Crawl"

    def ready(self) -> None:
        from django.conf import settings

        from core import patterns
        from core.net.guard import allow_networks, refuse_services
        from crawl.frontier.leases import leases_task_connect
        from crawlproject.dbconnections import task_connections_connect
        from crawlproject.logconfig import structlog_configure, task_context_connect
        from crawlproject.sqlcount import sqlcount_install

        patterns.MATCH_TIMEOUT = settings.CRAWL_REGEX_TIMEOUT

        allow_networks(settings.CRAWL_ALLOWED_NETWORKS)
        refuse_services(own_services(settings))
        structlog_configure(log_format=settings.CRAWLHUB_LOG_FORMAT)
        task_context_connect()
        task_connections_connect()
        leases_task_connect()
        sqlcount_install()  # the benchmark's statement counts; nothing unless CRAWLHUB_SQL_COUNT_DIR is set


def own_services(settings) -> list[str]:
    """The crawler's own servers, which no crawl may reach: the databases, the broker and result
    backend, the storage endpoints, CRAWL_REFUSED_SERVICES (Flower and the console by default), and
    the console's address in PORT and HOST (`serve` sets them for every process it starts)."""
    endpoints = list(settings.CRAWL_REFUSED_SERVICES) + console_endpoints(os.environ)
    for db in settings.DATABASES.values():
        if db.get("HOST") and not db["HOST"].startswith("/"):
            default_port = 3306 if "mysql" in db["ENGINE"] else 5432
            endpoints.append(f"//{db['HOST']}:{db.get('PORT') or default_port}")
    for name in ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "AWS_S3_ENDPOINT_URL", "AWS_S3_PUBLIC_ENDPOINT_URL"):
        value = getattr(settings, name, "") or ""
        if "://" in value and not value.startswith(("filesystem:", "memory:", "django-db", "file:")):
            endpoints.append(value)
    return endpoints


def console_endpoints(environ) -> list[str]:
    """The console's own address, when PORT names it: on loopback, and at HOST when that is set."""
    port, host = environ.get("PORT", ""), environ.get("HOST", "").strip("[]")
    if not (port.isascii() and port.isdigit()):
        return []
    endpoints = [f"localhost:{port}"]
    if host:
        endpoints.append(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    return endpoints
