"""The pipeline's queues and task routes (crawl/frontier/stages.py knows the stage order)."""

FETCH = "fetch"
EXTRACT = "extract"
DOWNLOAD = "download"
RENDER = "render"  # fetch in headless Chromium, for projects with render_js (needs a worker with chromium)
STAGE_QUEUES = (FETCH, EXTRACT, DOWNLOAD, RENDER)

TASK_ROUTES = {
    "crawl.fetch_batch": {"queue": FETCH},
    "crawl.reap": {"queue": FETCH},
    "crawl.dispatch": {"queue": FETCH},
    "console.jobs_tick": {"queue": FETCH},
    "crawl.render_batch": {"queue": RENDER},
    "scrape.extract_batch": {"queue": EXTRACT},
    "scrape.deliver": {"queue": EXTRACT},  # result sinks: their I/O beside extraction, never in its way
    "scrape.sinks_tick": {"queue": EXTRACT},
    "media.download_batch": {"queue": DOWNLOAD},
}
