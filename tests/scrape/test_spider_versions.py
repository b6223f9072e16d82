"""Spider code versions on the real database: deploy, refusal, rollback, what jobs and items record,
the checks and the commands that deploy and check (scrape/spider_versions.py, manage.py deploy and
manage.py spider)."""

from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from console.models import Job
from console.runs.jobs import job_begin
from crawl.models import Page, Project
from crawl.services.projects import seeds_add
from fetch.services import pages_fetch
from scrape.models import Item, SpiderCheck, SpiderVersion
from scrape.services import pages_extract
from scrape.spider_code import SpiderCodeError
from scrape.spider_versions import (
    DeployRefused,
    project_spider,
    spider_check_add,
    spider_version_activate,
    spider_version_active,
    spider_version_deploy,
)
from tests.servers import Site, SiteServer

pytestmark = pytest.mark.django_db
HTML = {"Content-Type": "text/html; charset=utf-8"}
EXAMPLE_CHECKS = Path(__file__).parents[2] / "scrape" / "example_checks"
SPIDER = """
from scrape.spiders import Spider, route


class Shop(Spider):
    name = "shop"

    @route(r"/product/")
    def product(self, response):
        price = response.css("{selector}")
        yield {{"title": response.xpath("string(//h1)"), "price": price[0].text_content() if price else None}}
"""
OLD, NEW = SPIDER.format(selector=".price"), SPIDER.format(selector=".amount")
OLD_PAGE = b"<html><body><h1>Lamp</h1><span class='price'>12.50</span></body></html>"
NEW_PAGE = b"<html><body><h1>Lamp</h1><b class='amount'>12.50</b></body></html>"


@pytest.fixture
def shop(make_project):
    return make_project("shop", allow_private=True, obey_robots=False)


def crawl_here(project: Project, server: SiteServer, paths: list[str]) -> list[Page]:
    ids = seeds_add(project=project, urls=[server.url + p for p in paths])
    pages_extract(page_ids=pages_fetch(page_ids=ids))
    return list(Page.objects.filter(id__in=ids))


def test_a_deploy_stores_an_immutable_version_and_activates_it(shop, admin_user):
    version = spider_version_deploy(project=shop, source=OLD, user=admin_user, message="first")
    shop.refresh_from_db()
    assert (version.number, version.spider_name, version.created_by, version.message) == (
        1,
        "shop",
        admin_user,
        "first",
    )
    assert spider_version_active(shop) == version and shop.spider_version_id == version.id
    assert type(project_spider(shop)).__name__ == "Shop"
    with pytest.raises(ValueError, match="immutable"):
        version.save()
    assert spider_version_deploy(project=shop, source=OLD) == version, "the same source deploys nothing"
    assert SpiderVersion.objects.count() == 1


@pytest.mark.parametrize(
    ("source", "line", "reason"),
    [
        (OLD.replace("def product(self, response):", "def product(self, response)"), 9, "syntax error"),
        (OLD + "\nimport not_a_module_here\n", 13, "ModuleNotFoundError"),
        ("import re\n", None, "defines no spider"),
        (OLD + "        yield Request('/x', route='stok')\n", 12, "route 'stok'"),
    ],
)
def test_a_refused_deploy_names_its_line_and_changes_nothing(shop, source, line, reason):
    before = spider_version_deploy(project=shop, source=OLD)
    stamp = Project.objects.get(id=shop.id).rules_changed_at
    with pytest.raises(SpiderCodeError) as refused:
        spider_version_deploy(
            project=shop, source=source.replace("from scrape.spiders import", "from scrape.spiders import Request,")
        )
    assert refused.value.line == line and reason in str(refused.value)
    if line:
        assert f"line {line}" in str(refused.value)
    assert list(SpiderVersion.objects.all()) == [before]
    assert Project.objects.get(id=shop.id).rules_changed_at == stamp
    assert spider_version_active(Project.objects.get(id=shop.id)) == before


def test_items_record_the_version_that_made_them_and_a_rollback_takes_effect(shop):
    with SiteServer(Site({"/product/1": (200, HTML, OLD_PAGE)})) as server:
        v1 = spider_version_deploy(project=shop, source=OLD)
        [page] = crawl_here(shop, server, ["/product/1"])
        item = Item.objects.get(page=page, kind="spider")
        assert (item.data["price"], item.spider_version) == ("12.50", v1)
        v2 = spider_version_deploy(project=shop, source=NEW, message="the price moved to .amount")
        assert Project.objects.get(id=shop.id).rules_changed_at > page.fetched_at, "the same bytes are extracted again"
        page.refresh_from_db()
        Page.objects.filter(id=page.id).update(state="fetched")
        pages_extract(page_ids=[page.id])
        item = Item.objects.get(page=page, kind="spider")
        assert (item.data["price"], item.spider_version) == (None, v2)
        spider_version_activate(project=shop, version=v1)
        Page.objects.filter(id=page.id).update(state="fetched")
        pages_extract(page_ids=[page.id])
        item = Item.objects.get(page=page, kind="spider")
        assert (item.data["price"], item.spider_version) == ("12.50", v1)
    assert Item.objects.get(page=page, kind="page").spider_version is None, "the built-in page item is no version's"


def test_a_job_records_the_version_it_runs_and_a_deploy_while_it_runs_is_in_its_log(
    shop, django_capture_on_commit_callbacks
):
    v1 = spider_version_deploy(project=shop, source=OLD)
    job, _ = job_begin(project=shop, kind=Job.Kind.CRAWL, trigger=Job.Trigger.API)
    assert job.spider_version == v1
    with django_capture_on_commit_callbacks(execute=True):
        v2 = spider_version_deploy(project=shop, source=NEW)
    job.refresh_from_db()
    assert job.spider_version == v1
    assert [e.message for e in job.log.all()] == [
        f"spider version {v2.number} activated: pages extracted from now on use it"
    ]


def test_a_project_without_a_version_keeps_its_built_in_spider(make_project):
    project = make_project("builtin", spider="example-shop")
    assert type(project_spider(project)).__module__ == "scrape.example_spiders"


# Checks


def keep_check(project: Project, body: bytes, items: list[dict]) -> SpiderCheck:
    url = "http://shop.test/product/1"
    return spider_check_add(
        project=project, name="product", url=url, status=200, headers=HTML, body=body, request={}, expected_items=items
    )


def test_a_deploy_whose_checks_fail_is_refused_unless_forced(shop):
    v1 = spider_version_deploy(project=shop, source=OLD)
    keep_check(shop, NEW_PAGE, [{"title": "Lamp", "price": "12.50"}])  # the new template, as it should read
    with pytest.raises(DeployRefused) as refused:
        spider_version_deploy(project=shop, source=OLD.replace("Shop", "Shop2"))
    assert refused.value.differences == ['product: item 0: price: expected "12.50", got null']
    assert spider_version_active(shop) == v1 and SpiderVersion.objects.count() == 1
    forced = spider_version_deploy(project=shop, source=OLD.replace("Shop", "Shop2"), force=True)
    assert forced.number == 2
    assert spider_version_deploy(project=shop, source=NEW).number == 3, "the fix passes its check"


def test_spider_check_fails_on_the_changed_template_and_passes_after_the_fix(shop, tmp_path, capsys):
    spider_version_deploy(project=shop, source=OLD)
    keep_check(shop, NEW_PAGE, [{"title": "Lamp", "price": "12.50"}])
    with pytest.raises(CommandError, match="0 of 1 checks pass"):
        call_command("spider", "check", "shop")
    assert 'item 0: price: expected "12.50", got null' in capsys.readouterr().out
    draft = tmp_path / "shop.py"
    draft.write_text(NEW)
    call_command("spider", "check", "shop", "--draft", str(draft))
    assert "1 of 1 checks pass" in capsys.readouterr().out
    call_command("deploy", "shop", str(draft), "-m", "price moved")
    call_command("spider", "check", "shop")
    assert "shop: spider version 2" in capsys.readouterr().out
    call_command("spider", "checks-export", "shop", str(tmp_path / "checks"))
    call_command("spider", "check", "shop", "--checks", str(tmp_path / "checks"))
    assert "1 of 1 checks pass" in capsys.readouterr().out


@pytest.mark.parametrize("spider", ["example-shop", "example-api"])
def test_the_example_spiders_pass_their_checks(make_project, spider, capsys):
    make_project(spider, spider=spider)
    call_command("spider", "check", spider, "--checks", str(EXAMPLE_CHECKS / spider))
    out = capsys.readouterr().out
    assert "FAIL" not in out and " checks pass" in out and not out.startswith(f"{spider}: 0 of")


def test_the_example_checks_catch_a_broken_selector(make_project, tmp_path):
    make_project("shop-broken", spider="example-shop")
    broken = (Path(__file__).parents[2] / "scrape" / "example_spiders.py").read_text()
    broken = broken.replace("from .spiders", "from scrape.spiders").replace('".price"', '".cost"')
    (tmp_path / "draft.py").write_text(broken.replace("@register\nclass ExampleApi", "class ExampleApi"))
    with pytest.raises(CommandError, match="1 of 2 checks pass"):
        call_command(
            "spider",
            "check",
            "shop-broken",
            "--draft",
            str(tmp_path / "draft.py"),
            "--checks",
            str(EXAMPLE_CHECKS / "example-shop"),
        )


# The deploy command


def test_the_deploy_command_refuses_a_syntax_error_with_its_line_and_rolls_back(shop, tmp_path, capsys):
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text(OLD)
    bad.write_text("from scrape.spiders import Spider\n\nclass A(Spider:\n    pass\n")
    with pytest.raises(CommandError, match=r"nothing saved: .*bad.py: line 3: syntax error"):
        call_command("deploy", "shop", str(bad))
    assert SpiderVersion.objects.count() == 0
    call_command("deploy", "shop", str(good), "-m", "first")
    good.write_text(NEW)
    call_command("deploy", "shop", str(good), "-m", "second")
    call_command("deploy", "shop", "--activate", "1")
    assert "shop: spider version 1 is active" in capsys.readouterr().out
    assert spider_version_active(Project.objects.get(id=shop.id)).number == 1
    call_command("deploy", "shop", "--list")
    assert capsys.readouterr().out.splitlines()[0].startswith("* v1 ")
