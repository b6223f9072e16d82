"""A deploy reaches running workers: two real Celery workers, both warm with version 1, extract
with version 2 from their next batch after the deploy, with no restart; items and the job say so."""

import pytest

from console.models import Job
from console.runs.steering import crawl_start
from crawl.models import Page, Project
from scrape.models import Item
from scrape.spider_versions import spider_version_deploy
from tests.helpers import wait_until
from tests.servers import Site, SiteServer

SOURCE = """from scrape.spiders import Spider


class Numbered(Spider):
    name = "numbered"

    def default(self, response):
        yield {"url": response.url, "made_by": VERSION}


VERSION = 1
"""
HTML = {"Content-Type": "text/html; charset=utf-8"}
ROUND = 12  # pages per round; a worker takes 2 per extract batch


def crawl_round(project: Project, server: SiteServer, start: int) -> list[Page]:
    urls = [f"{server.url}/p/{n}" for n in range(start, start + ROUND)]
    crawl_start(project=project, trigger=Job.Trigger.COMMAND, seeds={"page": urls}, refuse_finished=False)
    pages = Page.objects.filter(project=project, url__in=urls)
    wait_until(lambda: pages.filter(state="done").count() == ROUND, timeout=90, what="the round's pages done")
    return list(pages)


def workers_of(pages: list[Page]) -> set[str]:
    return {p.extracted_by.split("@")[0] for p in pages}


def rounds_until_both_workers_extracted(project: Project, server: SiteServer, start: int) -> tuple[list[Page], int]:
    """Rounds of pages until each worker has extracted some of them."""
    pages: list[Page] = []
    for _ in range(8):
        pages += crawl_round(project, server, start)
        start += ROUND
        if workers_of(pages) == {"w1", "w2"}:
            return pages, start
    raise AssertionError(f"only {workers_of(pages)} extracted pages")


@pytest.mark.integration
def test_two_running_workers_use_a_new_version_from_their_next_batch(workers, worker_env):
    site = Site({f"/p/{n}": (200, HTML, f"<html><body><h1>{n}</h1></body></html>".encode()) for n in range(200)})
    with SiteServer(site) as server:
        project = Project.objects.create(name="numbered", slug="numbered", allow_private=True, obey_robots=False)
        v1 = spider_version_deploy(project=project, source=SOURCE, message="first")
        workers.env = {**workers.env, "CRAWL_EXTRACT_BATCH": "2", "CRAWL_FETCH_BATCH": "4"}
        workers.start("w1", "fetch,extract", concurrency=1)
        workers.start("w2", "fetch,extract", concurrency=1)
        before, start = rounds_until_both_workers_extracted(project, server, 0)
        v2 = spider_version_deploy(project=project, source=SOURCE.replace("VERSION = 1", "VERSION = 2"))
        after, _ = rounds_until_both_workers_extracted(project, server, start)
    made = {i.page_id: (i.data["made_by"], i.spider_version_id) for i in Item.objects.filter(kind="spider")}
    assert {made[p.id] for p in before} == {(1, v1.id)}
    assert {made[p.id] for p in after} == {(2, v2.id)}, "every page after the deploy, from both workers"
    job = Job.objects.get(project=project)
    assert job.spider_version == v1, "the job records the version it started with"
    assert job.log.filter(message__startswith=f"spider version {v2.number} activated").exists()
