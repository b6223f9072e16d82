"""docs/spiders-and-rules.md's tutorial "Fix a site whose template changed", run as written: its
shop's spider (the page's version 1) crawls a loopback shop, the template changes, and the page's
commands find the fix, compare it on the stored pages and deploy it; the next extraction has the
price again, made by version 2."""

import re

import pytest

from console.runs.control import pages_recrawl
from crawl.models import Page, Project
from crawl.services.projects import seeds_add
from fetch.services import pages_fetch
from scrape.models import Item
from scrape.services import pages_extract
from scrape.spider_versions import spider_version_deploy
from tests.servers import Site, SiteServer
from tests.system.test_docs import DOCS, checkout_copy, line_pattern, marked_blocks, run_block

PAGE = DOCS / "spiders-and-rules.md"
EXAMPLE = "https://shop.example"
HTML = {"Content-Type": "text/html; charset=utf-8"}
OLD = "<html><body><h1>Lamp {n}</h1><span class='price-now'>{n}.50</span></body></html>"
NEW = "<html><body><h1>Lamp {n}</h1><p><span class='price-tag'>{n}.50</span></p></body></html>"
HASH = re.compile(r"\b[0-9a-f]{12}\b")


def tutorial() -> str:
    text = PAGE.read_text()
    return text[text.index("## Fix a site whose template changed") :].split("\n## ", 1)[0]


def version_one() -> str:
    section = tutorial()
    return (
        section[section.index("```python\n") + len("```python\n") : section.index("\n```", section.index("```python"))]
        + "\n"
    )


def shop_files(template: str) -> dict:
    return {f"/product/{n}": (200, HTML, template.format(n=n).encode()) for n in range(1, 31)}


def crawl(project: Project, ids: list[int]) -> None:
    pages_extract(page_ids=pages_fetch(page_ids=ids))


def shown(sample: str, lines: list[str], url: str) -> bool:
    pattern = line_pattern(HASH.sub("HASH", sample.replace(EXAMPLE, url)))
    return any(pattern.match(HASH.sub("HASH", line)) for line in lines)


@pytest.mark.integration
def test_the_template_change_tutorial_runs_as_written(worker_env, tmp_path):
    blocks = marked_blocks(tutorial())
    assert len(blocks) == 4, "the page's four tested blocks"
    with SiteServer(Site(files=shop_files(OLD))) as shop:
        project = Project.objects.create(name="shop", slug="shop", allow_private=True, obey_robots=False)
        spider_version_deploy(project=project, source=version_one())
        ids = seeds_add(project=project, urls=[f"{shop.url}/product/{n}" for n in range(1, 31)])
        crawl(project, ids)
        shop.site.files = shop_files(NEW)
        pages_recrawl(project=project)
        crawl(project, ids)
        assert not [
            d for d in Item.objects.filter(project=project, kind="spider").values_list("data", flat=True) if d["price"]
        ]

        checkout = checkout_copy(tmp_path / "crawlhub")
        env = worker_env | {"CRAWL_ALLOW_PRIVATE": "False"}
        for block in blocks:
            output = run_block(block.script.replace(EXAMPLE, shop.url), checkout, env)
            for sample in block.expected:
                assert shown(sample, output.splitlines(), shop.url), f"the page shows {sample!r}; printed:\n{output}"

    project.refresh_from_db()
    Page.objects.filter(project=project).update(state="fetched")
    pages_extract(page_ids=ids)
    items = Item.objects.filter(project=project, kind="spider")
    assert {(i.data["price"] is not None, i.spider_version.number) for i in items} == {(True, 2)}
