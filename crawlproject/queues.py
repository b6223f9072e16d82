"""The pipeline's queues and the one place that knows the stage order (fetch -> extract -> download)."""

FETCH = "fetch"
EXTRACT = "extract"
DOWNLOAD = "download"
STAGE_QUEUES = (FETCH, EXTRACT, DOWNLOAD)

TASK_ROUTES = {
    "crawl.fetch_batch": {"queue": FETCH},
    "crawl.reap": {"queue": FETCH},
    "scrape.extract_batch": {"queue": EXTRACT},
    "media.download_batch": {"queue": DOWNLOAD},
}
