"""The debugger honours a stepped request's own fields as the crawl does: its proxy (through the
same egress gate: a private one only where the project allows private addresses), its timeout, and
the draft's sign() hook, run in the sandbox child just before the request is sent. Seen from
loopback servers, with a real worker for the runs."""

import json
import shutil

import pytest
from django.conf import settings

from console.admin.debugger_forms import run_initial
from console.debug_models import DebugRun
from console.debugger import debug_run_execute, debug_run_start
from core.net.guard import allow_networks
from crawl.models import Project
from tests.helpers import wait_until
from tests.partner_api import PartnerApi
from tests.servers import Site, SiteServer

HTML = {"Content-Type": "text/html; charset=utf-8"}
JSON = {"Content-Type": "application/json"}
OUTSIDE = "http://127.0.0.2:9/via-proxy"  # a host only the proxy reaches
PROXIED = """from scrape.spiders import Request, Spider


class ProxiedSpider(Spider):
    name = "proxied"

    def default(self, response):
        yield {"text": response.xpath("string(//p)")}
        yield Request("OUTSIDE", proxy="PROXY", timeout=7, render=False, route="default")
"""
SIGNED = """import hashlib
import hmac
import time
from urllib.parse import urlsplit

from scrape.spiders import Spider


class PartnerSpider(Spider):
    name = "partner"

    def default(self, response):
        yield {"ids": [i["id"] for i in response.json()["items"]]}

    def sign(self, request):
        parts = urlsplit(request.url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        stamp = f"{time.time():.3f}"
        message = f"{request.method}\\n{target}\\n{stamp}".encode()
        request.headers["X-Timestamp"] = stamp
        request.headers["X-Signature"] = hmac.new(b"partner-secret", message, hashlib.sha256).hexdigest()
        return request
"""
UNSIGNED = SIGNED.split("    def sign")[0]
TEXT = UNSIGNED.replace(
    '{"ids": [i["id"] for i in response.json()["items"]]}', '{"text": response.xpath("string(//p)")}'
)
SIGN_FAILS = SIGNED.replace("        parts = urlsplit", "        1 / 0\n        parts = urlsplit")


def finished(run: DebugRun) -> DebugRun:
    return wait_until(lambda: DebugRun.objects.filter(id=run.id, state__in=("done", "failed")).first(), timeout=120)


def page(text: str) -> tuple:
    return 200, HTML, f"<html><body><p>{text}</p></body></html>".encode()


def test_a_stepped_request_goes_through_its_own_proxy_with_its_timeout(workers):
    workers.start("extract", "extract")
    with SiteServer(Site(default=page("proxied"))) as proxy, SiteServer(Site(default=page("direct"))) as site:
        source = PROXIED.replace("OUTSIDE", OUTSIDE).replace("PROXY", proxy.url)
        project = Project.objects.create(name="p", slug="p", allow_private=True, obey_robots=False,
                                         allowed_domains="127.0.0.1\n127.0.0.2")  # fmt: skip
        first = finished(debug_run_start(project=project, user=None, source=source, url=f"{site.url}/start"))
        (followup,) = first.report["requests"]
        assert followup["request"] == {"proxy": proxy.url, "render": False, "timeout": 7.0, "route": "default"}
        stepped = run_initial(first, step="0")  # the form as "step into" fills it in
        assert (stepped["url"], stepped["proxy"], stepped["timeout"], stepped["render"]) == (
            OUTSIDE,
            proxy.url,
            7.0,
            "off",
        )
        run = finished(
            debug_run_start(project=project, user=None, source=source, url=OUTSIDE, request=followup["request"])
        )
    assert [r.line for r in proxy.requests] == [f"GET {OUTSIDE} HTTP/1.1"], "through its own proxy"
    assert run.report["items"] == [{"text": "proxied"}]
    assert run.report["fetch"]["proxy"] == proxy.url
    assert run.report["fetch"]["timeout"] == 7.0 and run.report["fetch"]["rendered"] is False


@pytest.mark.django_db
def test_a_requests_private_proxy_is_refused_unless_the_project_allows_private_addresses(settings_override):
    """127.0.0.2 stands for a public site; the proxy on loopback is private."""
    allow_networks(["127.0.0.2/32"])
    try:
        with SiteServer(Site(default=page("proxied"))) as proxy:
            closed = Project.objects.create(name="c", slug="c", allow_private=False, obey_robots=False)
            asked = {"proxy": proxy.url}
            run = debug_run_start(project=closed, user=None, source=UNSIGNED, url=OUTSIDE, request=asked)
            debug_run_execute(run.id)
            run.refresh_from_db()
    finally:
        allow_networks(settings.CRAWL_ALLOWED_NETWORKS)
    assert run.report["error"].startswith("blocked_address"), run.report
    assert proxy.requests == []


@pytest.fixture
def settings_override(settings):
    settings.CRAWL_ALLOW_PRIVATE = False
    return settings


def partner_project() -> Project:
    return Project.objects.create(name="partner", slug="partner", allow_private=True, obey_robots=False)


def test_the_drafts_sign_hook_signs_the_request_the_partner_api_checks(workers):
    workers.start("extract", "extract")
    api = PartnerApi({"*": {"items": [{"id": 1}, {"id": 2}]}}, refusal=b'{"items": []}')
    with api.server as server:
        project = partner_project()
        url = f"{server.url}/api/items?page=1"
        signed = finished(debug_run_start(project=project, user=None, source=SIGNED, url=url))
        posted = finished(debug_run_start(project=project, user=None, source=SIGNED, url=f"{server.url}/api/news",
                                          request={"method": "POST", "body": '{"since": 1}'}))  # fmt: skip
        unsigned = finished(debug_run_start(project=project, user=None, source=UNSIGNED, url=url))
    assert api.accepted == [("GET", "/api/items?page=1"), ("POST", "/api/news")]
    assert signed.report["status"] == 200 and signed.report["items"] == [{"ids": [1, 2]}]
    assert signed.report["fetch"]["signed"] is True and posted.report["status"] == 200
    assert unsigned.report["status"] == 401 and api.refused == ["GET /api/items?page=1"]


@pytest.mark.django_db
def test_a_sign_hook_that_fails_is_shown_and_nothing_is_sent():
    api = PartnerApi({"*": {"items": [{"id": 1}, {"id": 2}]}}, refusal=b'{"items": []}')
    with api.server as server:
        run = debug_run_start(project=partner_project(), user=None, source=SIGN_FAILS, url=f"{server.url}/api/x")
        debug_run_execute(run.id)
        run.refresh_from_db()
    assert run.report["error"].startswith("spider_error: sign() failed"), run.report
    assert "ZeroDivisionError" in run.report["error"] and api.server.requests == []


SCRIPTED = (
    "<html><body><p>static</p><script>document.querySelector('p').textContent = 'scripted';</script></body></html>"
)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (run scripts/system-deps.sh)")
@pytest.mark.django_db
def test_render_is_chosen_per_request():
    with SiteServer(Site(default=(200, HTML, SCRIPTED.encode()))) as site:
        project = Project.objects.create(name="r", slug="r", allow_private=True, obey_robots=False)
        texts = {}
        for render in (True, False):
            asked = {"render": render}
            run = debug_run_start(project=project, user=None, source=TEXT, url=f"{site.url}/p", request=asked)
            debug_run_execute(run.id)
            run.refresh_from_db()
            texts[render] = (run.report["fetch"]["rendered"], run.report["items"])
    assert texts == {True: (True, [{"text": "scripted"}]), False: (False, [{"text": "static"}])}


@pytest.mark.django_db
def test_a_replayed_request_shows_its_secrets_masked_and_sends_the_stored_ones(django_user_model):
    """The form a page fills in masks its header values, body and proxy credentials as every other
    surface does; sent back unchanged, the run asks for the stored values."""
    from django.test import RequestFactory

    from console.admin.debugger_forms import DebugForm, initial_from_query
    from crawl.models import Page

    admin = django_user_model.objects.create_superuser("root", password="x")
    project = Project.objects.create(name="keyed", slug="keyed")
    stored = {"method": "POST", "headers": {"X-Api-Key": "key-s3cret"}, "body": "pw=body-s3cret",
              "proxy": "http://u:proxy-s3cret@proxy.test:3128", "route": "default"}  # fmt: skip
    page = Page.objects.create(project=project, url="http://shop.test/api", url_key="k" * 64, host="shop.test",
                               request=stored)  # fmt: skip
    asked = RequestFactory().get(f"/admin/debugger/?page={page.id}")
    asked.user = admin
    initial = initial_from_query(asked)
    shown = json.dumps({k: v for k, v in initial.items() if k != "project"})
    assert "s3cret" not in shown and initial["replay_of"] == f"page:{page.id}"
    assert json.loads(initial["headers"]) == {"X-Api-Key": "***"} and initial["body"] == "***"
    assert initial["proxy"] == "http://u:***@proxy.test:3128"
    sent = {k: v for k, v in initial.items() if k not in ("project", "render", "timeout")} | {"project": project.id}
    form = DebugForm(sent, user=admin)
    assert form.is_valid(), form.errors
    request = form.cleaned_data["request"]
    assert request["headers"] == stored["headers"] and request["body"] == stored["body"]
    assert request["proxy"] == stored["proxy"]
    other = DebugForm(sent | {"replay_of": "page:999999"}, user=admin)
    assert other.is_valid() and other.cleaned_data["request"]["proxy"] == initial["proxy"], "nothing to unmask"
