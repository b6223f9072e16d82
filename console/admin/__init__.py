"""The Django admin of every model: the pipeline's (crawl, scrape, media) and the console's own."""

from . import access, alerts, crawl, frontier, jobs, media, render_routes, scrape, sinks, spider_versions  # noqa: F401 - each registers its admins
