"""Services of the crawl app: writes to the frontier, fetching, robots cache, reaper."""
