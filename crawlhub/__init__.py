"""crawlhub as a Python library: create or get a project, add seeds, run a job to its end, read
its items. The crawl command is built on it; docs/python-api.md has an example.

    import crawlhub

    shop = crawlhub.project("shop", allow_private=True, max_pages=500)
    crawlhub.add_seeds(shop, ["http://127.0.0.1:8001/"])
    result = crawlhub.run(shop)
    for item in crawlhub.items(shop, job=result.job):
        print(item["url"], item["data"])

Django is set up on first use (crawlproject.settings unless DJANGO_SETTINGS_MODULE names others).
"""

from crawlhub.api import Run, add_seeds, items, project, run, setup

__all__ = ["Run", "add_seeds", "items", "project", "run", "setup"]
