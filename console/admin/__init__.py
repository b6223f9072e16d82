"""The Django admin of every model: the pipeline's (crawl, scrape, media) and the console's own."""

from . import (  # noqa: F401 - each registers its admins
    access,
    alerts,
    crawl,
    frontier,
    jobs,
    media,
    proxies,
    render_routes,
    scrape,
    sinks,
    spider_versions,
)
