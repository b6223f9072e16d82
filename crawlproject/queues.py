"""The pipeline's queues and task routes (crawl/frontier/stages.py knows the stage order)."""

FETCH = "fetch"
EXTRACT = "extract"
DOWNLOAD = "download"
RENDER = "render"  # fetch in headless Chromium, for projects with render_js (needs a worker with chromium)
STAGE_QUEUES = (FETCH, EXTRACT, DOWNLOAD, RENDER)
# Housekeeping (reaper, recrawl ticks, jobs tick, sinks tick, pruning): every worker consumes it beside its
# stage queues, so it never waits behind a stage's backlog.
CONTROL = "control"
QUEUES = (*STAGE_QUEUES, CONTROL)

TASK_ROUTES = {
    "crawl.fetch_batch": {"queue": FETCH},
    "crawl.reap": {"queue": CONTROL},
    "crawl.dispatch": {"queue": CONTROL},
    "console.jobs_tick": {"queue": CONTROL},
    "console.prune": {"queue": CONTROL},
    "console.monitors_tick": {"queue": CONTROL},
    "crawl.render_batch": {"queue": RENDER},
    "scrape.extract_batch": {"queue": EXTRACT},
    "scrape.deliver": {"queue": EXTRACT},  # result sinks: their I/O beside extraction, never in its way
    "scrape.sinks_tick": {"queue": CONTROL},
    "media.download_batch": {"queue": DOWNLOAD},
}


def with_control(queues: str) -> str:
    """A worker's -Q list with the control queue added (every worker consumes it)."""
    names = [q for q in queues.split(",") if q]
    return ",".join(names if CONTROL in names else [*names, CONTROL])
