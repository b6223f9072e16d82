"""Acceptance: the spider workshop, in a real browser (Debian's chromium through Playwright) with
real workers. A shop's template changes and the "template changed" alert fires; from the alert the
debugger opens on a sample page; the selector is edited in the editor and run on that page, then on
the last 30 stored pages (the draft fills the price on 30 of 30, the active version on 0); it is
deployed, and the next recrawl's items have the price again, made by the new version, the alert
recovers, and no worker was restarted."""

import shutil

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect

from console.health.models import Alert, Monitor
from console.health.monitors import monitor_run, monitors_ensure
from console.models import Job
from console.runs.steering import crawl_start
from crawl.models import Page, Project
from scrape.models import Item
from scrape.spider_versions import spider_version_active, spider_version_deploy
from tests.console.test_admin_browser import ARTIFACTS, PASSWORD, chromium_page, log_in
from tests.helpers import wait_until
from tests.servers import Site, SiteServer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (scripts/system-deps.sh)"),
]
HTML = {"Content-Type": "text/html; charset=utf-8"}
PAGES = 30
SPIDER = """from scrape.spiders import Spider, route


class ShopSpider(Spider):
    name = "shop"

    @route(r"/product/")
    def product(self, response):
        price = response.css("span.price-now")
        yield {"title": response.xpath("string(//h1)"), "price": price[0].text_content() if price else None}
"""
OLD = "<html><body><h1>Lamp {n}</h1><span class='price-now'>{n}.50</span></body></html>"
NEW = "<html><body><h1>Lamp {n}</h1><div class='offer'><span class='price-tag'>{n}.50</span></div></body></html>"


def shop_files(template: str) -> dict:
    return {f"/product/{n}": (200, HTML, template.format(n=n).encode()) for n in range(1, PAGES + 1)}


def crawled(project: Project, *, priced: int, version=None) -> None:
    """Wait until every product page is done with an item of the spider, `priced` of them with a price."""

    def done() -> bool:
        items = list(Item.objects.filter(project=project, kind="spider").values_list("data", "spider_version_id"))
        fresh = not Page.objects.filter(project=project).exclude(state="done").exists()
        with_price = sum(1 for data, _ in items if data.get("price"))
        versions = {v for _, v in items}
        return fresh and len(items) == PAGES and with_price == priced and (version is None or versions == {version})

    wait_until(done, timeout=120, what=f"{PAGES} pages done, {priced} with a price")


def recrawl(project: Project) -> None:
    Job.objects.filter(project=project, state=Job.State.RUNNING).update(state=Job.State.SUCCEEDED)
    crawl_start(project=project, trigger=Job.Trigger.API, recrawl=True, refuse_finished=False)


def template_check(project: Project) -> tuple[int, int]:
    monitor = Monitor.objects.get(project=project, kind=Monitor.Kind.TEMPLATE_CHANGED)
    return monitor_run(monitor, project, timezone.now())


def test_a_changed_template_is_fixed_in_the_debugger_and_deployed_without_a_restart(live_server, workers):
    get_user_model().objects.create_superuser("operator", "operator@example.com", PASSWORD)
    worker = workers.start("shop", "fetch,extract")
    with SiteServer(Site(files=shop_files(OLD))) as shop:
        project = Project.objects.create(name="shop", slug="shop", allow_private=True, obey_robots=False)
        monitors_ensure([project.id])
        v1 = spider_version_deploy(project=project, source=SPIDER, message="first version")
        seeds = {"page": [f"{shop.url}/product/{n}" for n in range(1, PAGES + 1)]}
        crawl_start(project=project, trigger=Job.Trigger.API, seeds=seeds)
        crawled(project, priced=PAGES, version=v1.id)

        shop.site.files = shop_files(NEW)  # the redesign: the price element is gone
        recrawl(project)
        crawled(project, priced=0)
        assert template_check(project) == (1, 0)
        alert = Alert.objects.get(project=project, resolved_at=None, subject="spider field 'price'")
        assert "template changed? the spider: field 'price' in 0% of its items" in alert.message

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        with chromium_page() as page:
            fix_in_the_browser(page, live_server.url, shop.url)

        project.refresh_from_db()
        v2 = spider_version_active(project)
        assert v2.number == 2 and "span.price-tag" in v2.source
        recrawl(project)
        crawled(project, priced=PAGES, version=v2.id)
    assert template_check(project) == (0, 1)
    alert.refresh_from_db()
    assert alert.resolved_at is not None
    assert worker.process.poll() is None and list(workers.procs) == ["shop"], "the same worker ran throughout"


def fix_in_the_browser(page, base: str, shop_url: str) -> None:
    log_in(page, base)
    page.goto(f"{base}/admin/console/alert/")
    page.locator("a.replay").first.click()
    url = page.locator("#id_url").input_value()
    assert url.startswith(f"{shop_url}/product/"), url
    expect(page.locator(".django-ace-widget .ace_content")).to_contain_text("span.price-now")
    page.screenshot(path=str(ARTIFACTS / "workshop-debugger-from-alert.png"), full_page=True)

    editor = page.locator(".django-ace-widget")
    editor.evaluate("w => { w.editor.find('span.price-now'); w.editor.replace('span.price-tag'); }")
    expect(page.locator(".django-ace-widget .ace_content")).to_contain_text("span.price-tag")
    page.click("#run-request")
    items = page.locator("table.debug-items")
    expect(items.locator("thead")).to_contain_text("price")
    expect(items.locator("tbody tr")).to_have_count(1)
    expect(items.locator("tbody td", has_text=url.rsplit("/", 1)[1] + ".50")).to_have_count(1)
    n = url.rsplit("/", 1)[1]
    expect(page.frame_locator("iframe.rendered").locator("h1")).to_have_text(f"Lamp {n}")
    page.fill("#id_selector", "span.price-tag")
    page.click("#try-selector")
    expect(page.locator(".selector-matches li")).to_have_text([f"{n}.50"])
    page.screenshot(path=str(ARTIFACTS / "workshop-draft-on-one-page.png"), full_page=True)

    page.click("#run-stored")
    expect(page.locator("#stored-comparison li[data-field=price]")).to_have_text(
        f"the draft fills price on {PAGES} of {PAGES} pages, the active version on 0 of {PAGES}"
    )
    page.screenshot(path=str(ARTIFACTS / "workshop-stored-pages.png"), full_page=True)

    page.fill("#id_message", "the price moved to span.price-tag")
    page.click("#deploy")
    expect(page.locator(".messagelist")).to_contain_text("Version 2 of shop deployed")
    page.screenshot(path=str(ARTIFACTS / "workshop-deployed.png"), full_page=True)
