"""Services of the crawl app: projects and seeds, freshness, recrawl schedules."""
