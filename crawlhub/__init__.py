"""crawlhub as a Python library: create or get a project, add seeds, run a job to its end, read
its items. It runs jobs as the crawl command does (console/runs/job_runs.py); docs/python-api.md has an
example.

    import crawlhub

    shop = crawlhub.project("shop", allow_private=True, max_pages=500)
    crawlhub.add_seeds(shop, ["http://127.0.0.1:8001/"])
    result = crawlhub.run(shop)
    for item in crawlhub.items(shop, job=result.job):
        print(item["url"], item["data"])

Django is set up on first use (crawlproject.settings unless DJANGO_SETTINGS_MODULE names others).
"""

from crawlhub.api import add_seeds, items, project, run, setup


def __getattr__(name: str):
    if name == "Run":  # the console's; Django is set up first
        setup()
        from console.runs.job_runs import Run

        return Run
    raise AttributeError(name)


__all__ = ["Run", "add_seeds", "items", "project", "run", "setup"]
