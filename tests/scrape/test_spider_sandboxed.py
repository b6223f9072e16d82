"""User spider code runs only in the sandbox's child, never in the process that deploys it or
starts a job (the web process, for the API and the admin): a deploy's vetting (compile, one spider,
its routes, its checks) and a deployed version's start() hook. The child has no database, broker or
secret in its environment, and code that loops forever is stopped at the limit with a clear message
while the caller goes on."""

import pytest
from django.test import override_settings

import scrape.spiders
from console.models import Job
from console.runs.steering import crawl_start
from crawl.models import Page
from scrape.models import SpiderVersion
from scrape.spider_code import SpiderCodeError
from scrape.spider_versions import spider_check_add, spider_version_deploy

pytestmark = pytest.mark.django_db
SPIDER = """import os

import scrape.spiders
from scrape.spiders import Request, Spider

scrape.spiders.TOUCHED_BY_USER_CODE = os.getpid()  # would show in the caller's own module
assert "DATABASE_URL" not in os.environ and "CELERY_BROKER_URL" not in os.environ


class Shop(Spider):
    name = "shop"

    def start(self):
        scrape.spiders.TOUCHED_BY_USER_CODE = os.getpid()
        assert "DATABASE_URL" not in os.environ, "a secret reached user code"
        yield Request("http://127.0.0.1:9/api/first", route="default", meta={"n": 1})
        yield Request("http://127.0.0.1:9/api/form", method="POST", data={"q": "x"})

    def default(self, response):
        yield {"url": response.url, "title": "".join(response.xpath("//h1/text()"))}
"""
LOOPS_ON_IMPORT = SPIDER.replace("scrape.spiders.TOUCHED_BY_USER_CODE = os.getpid()  #", "while True:\n    pass  #")
START_LOOPS = SPIDER.replace("    def start(self):\n", "    def start(self):\n        while True:\n            pass\n")


@pytest.fixture(autouse=True)
def untouched():
    yield
    assert not hasattr(scrape.spiders, "TOUCHED_BY_USER_CODE"), "user code ran in the calling process"


def test_a_deploy_vets_the_code_in_the_sandbox_child(make_project):
    project = make_project(name="shop", allow_private=True)
    version = spider_version_deploy(project=project, source=SPIDER, message="first")
    assert (version.number, version.spider_name) == (1, "shop")


@override_settings(CRAWL_DEBUG_SECONDS=2)
def test_a_module_whose_top_level_loops_forever_is_refused_and_nothing_is_saved(make_project):
    project = make_project(name="shop")
    with pytest.raises(SpiderCodeError) as refused:
        spider_version_deploy(project=project, source=LOOPS_ON_IMPORT)
    assert "stopped after 2 s" in str(refused.value) and "time limit" in str(refused.value)
    assert SpiderVersion.objects.count() == 0
    assert spider_version_deploy(project=project, source=SPIDER).number == 1, "the caller goes on"


def test_a_deploys_checks_run_in_the_sandbox_and_refuse_a_difference(make_project):
    project = make_project(name="shop")
    body = "<html><h1>Lamp</h1></html>"
    spider_check_add(project=project, name="lamp", url="http://shop.test/p", status=200, headers={}, body=body,
                     request={}, expected_items=[{"url": "http://shop.test/p", "title": "Lamp"}])  # fmt: skip
    assert spider_version_deploy(project=project, source=SPIDER).number == 1
    with pytest.raises(SpiderCodeError, match=r"1 check\(s\) fail: lamp: item 0: title"):
        spider_version_deploy(project=project, source=SPIDER.replace("//h1/", "//h2/"))


def test_a_deployed_start_hook_runs_in_the_sandbox_and_its_requests_are_queued(make_project):
    project = make_project(name="shop", allow_private=True)
    spider_version_deploy(project=project, source=SPIDER)
    crawl_start(project=project, trigger=Job.Trigger.COMMAND, seeds={"page": ["http://127.0.0.1:9/seed"]})
    rows = {p.url: p for p in Page.objects.filter(project=project)}
    assert set(rows) == {"http://127.0.0.1:9/seed", "http://127.0.0.1:9/api/first", "http://127.0.0.1:9/api/form"}
    assert rows["http://127.0.0.1:9/api/first"].request == {"route": "default", "meta": {"n": 1}}
    assert rows["http://127.0.0.1:9/api/form"].request["body"] == "q=x"


@override_settings(CRAWL_DEBUG_SECONDS=2)
def test_a_start_hook_that_loops_forever_is_stopped_and_the_seeds_still_go(make_project, caplog):
    project = make_project(name="shop", allow_private=True)
    spider_version_deploy(project=project, source=START_LOOPS)
    crawl_start(project=project, trigger=Job.Trigger.COMMAND, seeds={"page": ["http://127.0.0.1:9/seed"]})
    assert list(Page.objects.filter(project=project).values_list("url", flat=True)) == ["http://127.0.0.1:9/seed"]
    assert "start() hook of spider version" in caplog.text and "stopped after 2 s" in caplog.text
