"""The bench's own reads of the scratch database, through a Django alias added at run time.

The bench process never sets CRAWLHUB_SQL_COUNT_DIR, so these statements are not counted.
"""

from django.db import connections

from crawl.models import Page

ALIAS = "bench_scratch"


class ScratchDB:
    def __init__(self, config: dict):
        if ALIAS in connections.settings:
            connections[ALIAS].close()
        # configure_settings fills in the defaults of a DATABASES entry (it insists on a "default" key).
        connections.settings[ALIAS] = connections.configure_settings({"default": dict(config)})["default"]

    def discovered(self) -> int:
        """URLs in the frontier: a count, not max(id) (PostgreSQL spends ids on ON CONFLICT DO NOTHING)."""
        return Page.objects.using(ALIAS).count()

    def fetched_final_urls(self) -> list[str]:
        """Final URLs of the pages fetched with a 2xx status (the crawl's pages, as a checker sees them)."""
        rows = Page.objects.using(ALIAS).filter(status_code__gte=200, status_code__lt=300)
        return [final or url for url, final in rows.values_list("url", "final_url").iterator(chunk_size=5000)]

    def backend_pid(self) -> int | None:
        if connections[ALIAS].vendor != "postgresql":
            return None
        with connections[ALIAS].cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return cursor.fetchone()[0]

    def close(self) -> None:
        connections[ALIAS].close()  # this thread's connection (connections are per thread)
