"""The spider debugger on a loopback shop: a draft runs in a real worker (never the web process),
shows its items, follow-up requests with their fates, logs and traceback; a draft that loops
forever is stopped at its limit and the worker goes on; stored pages are compared without the
network; loopback is refused unless the project allows it; only the spider code permission edits."""

import json
import zlib

import pytest
from django.contrib.auth.models import Group

from console.access.roles import roles_install
from console.debug_models import DebugRun
from console.debugger import debug_run_execute, debug_run_start
from console.models import ProjectAccess
from core.canonical import url_key
from crawl.models import Page, PageContent, Project
from scrape.models import SpiderCheck, SpiderVersion
from tests.helpers import wait_until
from tests.servers import Site, SiteServer

HTML = {"Content-Type": "text/html; charset=utf-8"}
PRODUCT = (
    '<html><body><h1>Lamp {n}</h1><span class="price-now">{n}.50</span><a href="/product/{m}">next</a></body></html>'
)
DRAFT = """from scrape.spiders import Request, Spider, route


class ShopSpider(Spider):
    name = "shop"

    @route(r"/product/")
    def product(self, response):
        self.log.info("product %s", response.url)
        price = response.css("span.price-now")
        yield {"title": response.xpath("string(//h1)"), "price": price[0].text if price else None}
        for a in response.css("a[href]"):
            yield Request(a.get("href"), meta={"from": response.url})
        yield Request("http://elsewhere.test/x")
        yield Request("/private/p")
        yield Request("/api/stock", method="POST", json={"id": 7}, route="stock", meta={"id": 7})

    def stock(self, response):
        yield {"id": response.meta["id"], "stock": response.json()["stock"]}
"""
BROKEN = DRAFT.replace('yield {"id"', '1 / 0\n        yield {"id"')
LOOPS = DRAFT.replace('self.log.info("product %s", response.url)', "while True:\n            pass")


@pytest.fixture
def shop():
    files = {f"/product/{n}": (200, HTML, PRODUCT.format(n=n, m=n + 1).encode()) for n in range(1, 40)}
    files["/robots.txt"] = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /private/\n")
    files["/api/stock"] = (200, {"Content-Type": "application/json"}, b'{"stock": 3}')
    with SiteServer(Site(files=files)) as server:
        yield server


def shop_project(shop, **fields) -> Project:
    fields = {"allow_private": True, "allowed_domains": "127.0.0.1"} | fields
    return Project.objects.create(name="shop", slug="shop", **fields)


def finished(run: DebugRun) -> DebugRun:
    return wait_until(lambda: DebugRun.objects.filter(id=run.id, state__in=("done", "failed")).first(), timeout=120)


def test_a_draft_runs_in_a_worker_and_shows_items_followups_and_logs(shop, workers):
    workers.start("extract", "extract")
    project = shop_project(shop)
    Page.objects.create(project=project, url=f"{shop.url}/product/2", url_key=url_key(f"{shop.url}/product/2"),
                        host="127.0.0.1", state="done")  # fmt: skip
    run = finished(debug_run_start(project=project, user=None, source=DRAFT, url=f"{shop.url}/product/1"))
    report = run.report
    assert run.state == "done" and report["status"] == 200
    assert report["items"] == [{"title": "Lamp 1", "price": "1.50"}]
    fates = {r["url"].replace(shop.url, ""): r["fate"] for r in report["requests"]}
    assert fates == {
        "/product/2": "known",
        "http://elsewhere.test/x": "out of scope",
        "/private/p": "refused by robots.txt",
        "/api/stock": "new",
    }
    assert [line["message"] for line in report["log"]] == [f"product {shop.url}/product/1"]
    assert "Lamp 1" in report["text"] and zlib.decompress(run.body).startswith(b"<html>")


def test_a_followup_request_is_replayed_with_its_method_body_route_and_meta(shop, workers):
    workers.start("extract", "extract")
    project = shop_project(shop)
    first = finished(debug_run_start(project=project, user=None, source=DRAFT, url=f"{shop.url}/product/1"))
    stock = next(r for r in first.report["requests"] if r["request"].get("route") == "stock")
    run = finished(
        debug_run_start(project=project, user=None, source=DRAFT, url=stock["url"], request=stock["request"])
    )
    assert run.report["items"] == [{"id": 7, "stock": 3}]
    posted = [r for r in shop.requests if r.path == "/api/stock"]
    assert [(r.method, r.body) for r in posted] == [("POST", b'{"id": 7}')] and run.report["request"]["meta"] == {
        "id": 7
    }


def test_an_exception_shows_its_traceback_at_the_drafts_line(shop, workers):
    workers.start("extract", "extract")
    project = shop_project(shop)
    stock = {"method": "POST", "body": '{"id": 7}', "route": "stock", "meta": {"id": 7}}
    run = finished(debug_run_start(project=project, user=None, source=BROKEN, url=f"{shop.url}/api/stock",
                                   request=stock))  # fmt: skip
    line = BROKEN.splitlines().index("        1 / 0") + 1
    assert run.report["spider_error"] == "spider_error: ZeroDivisionError: division by zero"
    assert f'File "<draft>", line {line}, in stock\n    1 / 0' in run.report["log"][-1]["message"]


def test_a_draft_that_does_not_compile_is_shown_with_its_line(shop, workers):
    workers.start("extract", "extract")
    run = finished(
        debug_run_start(project=shop_project(shop), user=None, source="x = (\n", url=f"{shop.url}/product/1")
    )
    assert run.report["compile_error"] == {"message": "syntax error: '(' was never closed", "line": 1}


def test_a_draft_that_loops_forever_is_stopped_at_its_limit_and_the_worker_goes_on(shop, workers):
    workers.env["CRAWL_DEBUG_SECONDS"] = "2"
    workers.start("extract", "extract", concurrency=1)
    project = shop_project(shop)
    stopped = finished(debug_run_start(project=project, user=None, source=LOOPS, url=f"{shop.url}/product/1"))
    assert stopped.state == "failed"
    assert stopped.report["stopped"].startswith("stopped after 2 s: the code ran past the sandbox's time limit")
    after = finished(debug_run_start(project=project, user=None, source=DRAFT, url=f"{shop.url}/product/3"))
    assert after.state == "done" and after.report["items"][0]["title"] == "Lamp 3"


@pytest.mark.django_db
def test_a_loopback_url_is_refused_unless_the_project_allows_private_addresses(shop, settings):
    settings.CRAWL_ALLOW_PRIVATE = False
    closed = shop_project(shop, allow_private=False)
    run = debug_run_start(project=closed, user=None, source=DRAFT, url=f"{shop.url}/product/1")
    debug_run_execute(run.id)
    run.refresh_from_db()
    assert run.report["error"].startswith("blocked_address") and "items" not in run.report
    assert shop.requests == []
    closed.allow_private = True
    closed.save()
    run = debug_run_start(project=closed, user=None, source=DRAFT, url=f"{shop.url}/product/1")
    debug_run_execute(run.id)
    run.refresh_from_db()
    assert run.report["items"][0]["title"] == "Lamp 1"


def stored_page(project: Project, url: str, body: bytes) -> Page:
    page = Page.objects.create(project=project, url=url, url_key=url_key(url), host="shop.test", state="done",
                               status_code=200)  # fmt: skip
    PageContent.objects.create(page=page, headers=HTML, body=zlib.compress(body))
    return page


@pytest.mark.django_db
def test_stored_pages_are_compared_field_by_field_without_the_network():
    project = Project.objects.create(name="stored", slug="stored")
    for n in range(1, 6):
        page = stored_page(project, f"http://shop.test/product/{n}", PRODUCT.format(n=n, m=n + 1).encode())
        page.items.create(project=project, kind="spider", data={"title": f"Lamp {n}", "price": None})
    run = debug_run_start(project=project, user=None, source=DRAFT, stored_pages=30)
    debug_run_execute(run.id)
    run.refresh_from_db()
    fields = {f["name"]: (f["draft"], f["active"], f["pages"]) for f in run.report["fields"]}
    assert run.report["pages"] == 5 and fields == {"price": (5, 0, 5), "title": (5, 5, 5)}


def member(django_user_model, role: str):
    roles_install()
    user = django_user_model.objects.create_user(role, password="x", is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    return user


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["viewer", "operator"])
@pytest.mark.parametrize("action", ["run", "deploy", "check"])
def test_viewers_and_operators_cannot_edit_or_deploy_from_the_editor(client, django_user_model, role, action):
    project = Project.objects.create(name="mine", slug="mine")
    user = member(django_user_model, role)
    ProjectAccess.objects.create(project=project, user=user)
    client.force_login(user)
    data = {"project": project.id, "url": "http://shop.test/", "method": "GET", "source": DRAFT, "action": action}
    response = client.post("/admin/debugger/", data)
    assert response.status_code == 403
    assert not DebugRun.objects.exists()


@pytest.mark.django_db
def test_the_debugger_and_try_a_url_fill_the_url_in_from_the_query(admin_client):
    project = Project.objects.create(name="q", slug="q")
    html = admin_client.get("/admin/debugger/?url=http://shop.test/p%3Fa%3D1&project=q").content.decode()
    assert 'value="http://shop.test/p?a=1"' in html and f'<option value="{project.id}" selected>' in html
    assert 'class="django-ace-widget' in html and "/static/django_ace/ace/ace.js" in html
    html = admin_client.get("/admin/tryurl/?url=http://shop.test/x").content.decode()
    assert 'value="http://shop.test/x"' in html


@pytest.mark.django_db
def test_a_failed_page_opens_the_debugger_with_its_stored_request(admin_client):
    project = Project.objects.create(name="f", slug="f")
    url = "http://shop.test/api/stock"
    request = {"method": "POST", "body": '{"id": 7}', "route": "stock", "meta": {"id": 7}}
    page = Page.objects.create(project=project, url=url, url_key=url_key(url), host="shop.test", state="failed",
                               error_code="spider_error", request=request)  # fmt: skip
    change = admin_client.get(f"/admin/crawl/page/{page.id}/change/").content.decode()
    assert f'href="/admin/debugger/?page={page.id}"' in change
    html = admin_client.get(f"/admin/debugger/?page={page.id}").content.decode()
    assert f'value="{url}"' in html and '<option value="POST" selected>' in html
    assert 'value="stock"' in html and json.dumps({"id": 7}).replace('"', "&quot;") in html


def finished_run(project: Project, **report) -> DebugRun:
    body = PRODUCT.format(n=1, m=2).encode()
    report = {"url": "http://shop.test/product/1", "status": 200, "headers": {"content-type": "text/html"}} | report
    return DebugRun.objects.create(project=project, source=DRAFT, request={"url": report["url"]}, state="done",
                                   report=report, body=zlib.compress(body))  # fmt: skip


@pytest.mark.django_db
def test_keep_as_a_check_saves_the_response_with_its_items(admin_client):
    project = Project.objects.create(name="k", slug="k")
    run = finished_run(project, items=[{"title": "Lamp 1", "price": "1.50"}], request={})
    data = {"project": project.id, "url": "http://shop.test/product/1", "method": "GET", "source": DRAFT,
            "action": "check", "run": run.id, "check_name": "lamp"}  # fmt: skip
    response = admin_client.post("/admin/debugger/", data)
    assert response.status_code == 302
    check = SpiderCheck.objects.get(project=project, name="lamp")
    assert check.expected_items == [{"title": "Lamp 1", "price": "1.50"}] and bytes(check.body).startswith(b"<html>")


@pytest.mark.django_db
def test_a_deploy_from_the_editor_that_does_not_compile_is_refused_with_its_line(admin_client):
    project = Project.objects.create(name="d", slug="d")
    data = {"project": project.id, "method": "GET", "source": "x = (\n", "action": "deploy"}
    response = admin_client.post("/admin/debugger/", data)
    assert response.status_code == 400 and "Not deployed (line 1)" in response.content.decode()
    assert not SpiderVersion.objects.exists()
    response = admin_client.post("/admin/debugger/", data | {"source": DRAFT, "message": "first"})
    assert response.status_code == 302 and SpiderVersion.objects.get(project=project).message == "first"


@pytest.mark.django_db
def test_the_response_is_rendered_sandboxed_without_scripts(admin_client):
    run = finished_run(Project.objects.create(name="r", slug="r"), items=[], text="<script>x</script>")
    page = admin_client.get(f"/admin/debugger/?run={run.id}").content.decode()
    frame = f'<iframe class="rendered" sandbox="" referrerpolicy="no-referrer" src="/admin/debugger/{run.id}/rendered/"'
    assert frame in page and "&lt;script&gt;x&lt;/script&gt;" in page
    rendered = admin_client.get(f"/admin/debugger/{run.id}/rendered/")
    assert rendered.content.startswith(b"<html><body><h1>Lamp 1</h1>")
    assert rendered["Content-Security-Policy"].startswith("sandbox; default-src 'none'")
    assert rendered["X-Frame-Options"] == "SAMEORIGIN"
