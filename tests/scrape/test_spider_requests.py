"""Spider requests (pyspider's self.crawl): a spider POSTs JSON with a header to a loopback API and
routes the answer to a second handler with meta, end to end with a real worker; non-GET rows keyed
by method and body; itag and age on known pages; handler logs and tracebacks kept with the page and
shown in the admin; the Request's validation."""

import json
import logging
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.canonical import request_key, url_key
from crawl.frontier.discovery import pages_discover
from crawl.frontier.verdicts import Link
from crawl.models import Page
from crawl.policy import project_config_changed
from crawl.services.projects import project_get_or_create, seeds_add
from fetch.requests import build_request
from fetch.services import pages_fetch
from scrape.example_spiders import ExampleApiSpider
from scrape.models import HandlerLog, Item
from scrape.services import pages_extract, pages_reextract
from scrape.spiders import Follow, Request, RequestError, Response, Spider, register, route, run_spider
from tests.conftest import run_manage
from tests.servers import NOT_FOUND, Site, SiteServer
from tests.servers import Request as ServerRequest

API_KEY = "k-123"
RESULTS = {
    "lamps": [{"title": "Anglepoise", "price": 120.0}, {"title": "Banker", "price": 80.0}],
    "desks": [{"title": "Oak desk", "price": 400.0}],
}
SEARCH_PAGE = (
    "<html><body><h1>Search</h1>"
    + "".join(
        f'<form class="search" data-api="/api/search" data-key="{API_KEY}"><input name="q" value="{q}"></form>'
        for q in RESULTS
    )
    + "</body></html>"
).encode()
HTML = "text/html; charset=utf-8"


def refusal(request: ServerRequest) -> str:
    """Why the API refuses a POST: anything but the request the example spider must send (POST, the
    API key header, a JSON body naming a known query)."""
    if request.path != "/api/search":
        return f"no API at {request.path}"
    if request.headers.get("X-Api-Key") != API_KEY or request.headers.get("Content-Type") != "application/json":
        return f"wrong headers: {request.headers}"
    if json.loads(request.body).get("q") not in RESULTS:
        return f"unknown query in {request.body!r}"
    return ""


def search(request: ServerRequest) -> tuple:
    if request.method != "POST":
        return NOT_FOUND
    if why := refusal(request):
        return 400, {"Content-Type": "text/plain"}, why.encode()
    answer = {"results": RESULTS[json.loads(request.body)["q"]]}
    return 200, {"Content-Type": "application/json"}, json.dumps(answer).encode()


def api_server(pages: dict[str, bytes]) -> SiteServer:
    """127.0.0.1: GET serves `pages`; POST /api/search answers JSON, or 400 saying why it refuses."""
    files = {path: (200, {"Content-Type": HTML}, body) for path, body in pages.items()}
    return SiteServer(Site(files | {"/api/search": search}))


@register
class LoggingSpider(Spider):
    name = "requests-test-logging"

    @route(r"/fine")
    def fine(self, response):
        self.log.info("parsing %s", response.url)
        logging.getLogger(__name__).warning("the module's logger is kept too")
        yield {"heading": response.soup.h1.get_text()}

    @route(r"/broken")
    def broken(self, response):
        self.log.info("about to fail")
        yield {"n": 1}
        raise KeyError("price")

    @route(r"/bad-request")
    def bad_request(self, response):
        yield Request("/x", meta={"notes": "x" * 5000})


# End to end, with a real worker


@pytest.mark.integration
def test_a_spider_posts_json_to_an_api_and_routes_the_answers_to_a_handler_with_their_meta(workers, worker_env):
    with api_server({"/search": SEARCH_PAGE}) as server:
        project_get_or_create(name="api", allow_private=True, obey_robots=False, spider="example-api")
        workers.start("all", "fetch,extract,download")
        args = ["crawl", f"{server.url}/search", "--workers", "0", "--project", "api", "--timeout", "120"]
        done = run_manage(args, worker_env)
    assert done.returncode == 0, done.stdout + done.stderr
    posts = [r for r in server.requests if r.method == "POST"]
    assert [refusal(r) for r in posts if refusal(r)] == []
    assert sorted(json.loads(r.body)["q"] for r in posts) == ["desks", "lamps"]
    api_pages = Page.objects.filter(project__slug="api", url=f"{server.url}/api/search")
    assert len(api_pages) == 2, "two bodies to one URL are two rows"
    assert {(p.state, p.request["method"], p.request["route"]) for p in api_pages} == {("done", "POST", "results")}
    items = Item.objects.filter(project__slug="api", kind="spider").order_by("data__query", "position")
    assert [(i.data["query"], i.data["title"]) for i in items] == [
        ("desks", "Oak desk"),
        ("lamps", "Anglepoise"),
        ("lamps", "Banker"),
    ]
    assert {i.page.request["meta"]["query"] for i in items if i.data["query"] == "lamps"} == {"lamps"}
    search = Page.objects.get(project__slug="api", url=f"{server.url}/search")
    assert [(line.level, line.message) for line in HandlerLog.objects.filter(page=search).order_by("id")] == [
        ("INFO", "asking /api/search for 'lamps'"),
        ("INFO", "asking /api/search for 'desks'"),
    ]


# Handler logs and exceptions, kept with the page (in this process: the fetch and extract services)


def crawl_here(project, server: SiteServer, paths: list[str]) -> dict[str, Page]:
    ids = seeds_add(project=project, urls=[server.url + p for p in paths])
    pages_extract(page_ids=pages_fetch(page_ids=ids))
    return {p.url.removeprefix(server.url): p for p in Page.objects.filter(id__in=ids)}


@pytest.fixture
def logging_site():
    pages = {p: f"<html><body><h1>Heading of {p}</h1></body></html>".encode() for p in ("/fine", "/broken")}
    with api_server(pages | {"/bad-request": b"<html><body>x</body></html>"}) as server:
        yield server


def test_a_handlers_log_lines_and_its_exception_are_kept_with_its_page_and_shown_in_the_admin(
    db, admin_client, logging_site
):
    project = project_get_or_create(name="logs", allow_private=True, obey_robots=False, spider=LoggingSpider.name)
    pages = crawl_here(project, logging_site, ["/fine", "/broken"])
    fine, broken = pages["/fine"], pages["/broken"]
    assert fine.state == "done"
    assert Item.objects.get(page=fine, kind="spider").data == {"heading": "Heading of /fine"}
    assert [(x.level, x.message) for x in HandlerLog.objects.filter(page=fine).order_by("id")] == [
        ("INFO", f"parsing {logging_site.url}/fine"),
        ("WARNING", "the module's logger is kept too"),
    ]
    assert (broken.state, broken.error_code, broken.error_message) == (
        "failed",
        "spider_error",
        "spider_error: KeyError: 'price'",
    )
    info, error = HandlerLog.objects.filter(page=broken).order_by("id")
    assert (info.level, info.message) == ("INFO", "about to fail")
    assert error.level == "ERROR"
    assert error.message.startswith("Traceback") and "in broken" in error.message
    assert error.message.rstrip().endswith("KeyError: 'price'")

    shown = admin_client.get(f"/admin/crawl/page/{broken.id}/change/").content.decode()
    assert "Handler log" in shown
    assert "about to fail" in shown and "raise KeyError(" in shown


def test_reextraction_replaces_a_pages_handler_log(db, logging_site):
    project = project_get_or_create(name="relog", allow_private=True, obey_robots=False, spider=LoggingSpider.name)
    fine = crawl_here(project, logging_site, ["/fine"])["/fine"]
    first = list(HandlerLog.objects.filter(page=fine).values_list("id", flat=True))
    pages_reextract(project=project)
    pages_extract(page_ids=[fine.id])
    again = list(HandlerLog.objects.filter(page=fine).values_list("id", flat=True))
    assert len(again) == len(first) == 2
    assert set(again).isdisjoint(first)


def test_an_invalid_request_fails_the_page_that_made_it_not_its_batch(db, logging_site):
    project = project_get_or_create(name="badreq", allow_private=True, obey_robots=False, spider=LoggingSpider.name)
    pages = crawl_here(project, logging_site, ["/fine", "/bad-request"])
    bad = pages["/bad-request"]
    assert (bad.state, bad.error_code) == ("failed", "spider_error")
    assert bad.error_message == "spider_error: RequestError: meta is 5013 bytes as JSON, over 4096"
    assert pages["/fine"].state == "done"


# The frontier: rows of requests, itag and age


@pytest.fixture
def project(make_project):
    return make_project(name="frontier-requests", allow_private=True)


def test_two_posts_with_different_bodies_to_one_url_are_two_rows_and_a_get_keeps_its_key(project):
    url = "http://a.test/api/search"
    post = {"method": "POST", "headers": {"Content-Type": "application/json"}}
    links = [
        Link(url, 1, request=post | {"body": '{"q": "lamps"}'}),
        Link(url, 1, request=post | {"body": '{"q": "desks"}'}),
        Link(url, 1, request=post | {"body": '{"q": "lamps"}', "meta": {"again": True}}),
        Link(url, 1),
    ]
    assert len(pages_discover(project=project, links=links)) == 3
    rows = {p.request.get("body"): p for p in Page.objects.filter(project=project)}
    assert rows[None].url_key == url_key(url), "a plain GET's key is unchanged"
    assert rows['{"q": "lamps"}'].url_key == request_key(url, "POST", '{"q": "lamps"}')
    assert rows['{"q": "lamps"}'].request == post | {"body": '{"q": "lamps"}'}, "the first of the batch wins"
    assert len({r.url_key for r in rows.values()}) == 3
    assert pages_discover(project=project, links=links) == []


def done_page(project, url: str, **request) -> Page:
    (page_id,) = pages_discover(project=project, links=[Link(url, 1, request=request)])
    Page.objects.filter(id=page_id).update(
        state="done", fetched_at=timezone.now() - timedelta(hours=1), content_sha256="c0ffee", etag='"e1"'
    )
    return Page.objects.get(id=page_id)


def test_a_known_done_page_is_fetched_again_when_a_link_brings_another_itag(project):
    page = done_page(project, "http://a.test/p", itag="v1", route="detail")
    pages_discover(project=project, links=[Link(page.url, 1, request={"itag": "v1"})])
    assert Page.objects.get(id=page.id).state == "done", "the same itag: nothing to do"
    pages_discover(project=project, links=[Link(page.url, 1, request={"itag": "v2"})])
    page = Page.objects.get(id=page.id)
    assert (page.state, page.request, page.content_sha256, page.etag) == (
        "queued",
        {"itag": "v2", "route": "detail"},
        "",
        "",
    ), "queued with the new itag, without the validators that would make its answer a 304"


def test_a_known_done_page_is_fetched_again_when_older_than_a_links_age(project):
    page = done_page(project, "http://a.test/aged")
    pages_discover(project=project, links=[Link(page.url, 1, request={"age": 7200})])
    assert Page.objects.get(id=page.id).state == "done", "fetched an hour ago: younger than two"
    pages_discover(project=project, links=[Link(page.url, 1, request={"age": 600})])
    page = Page.objects.get(id=page.id)
    assert (page.state, page.etag) == ("queued", '"e1"')


def test_links_that_carry_an_itag_cost_one_query_more_than_plain_links(project):
    urls = [f"http://a.test/q{i}" for i in range(20)]
    for url in urls:
        done_page(project, url, itag="v1")
    with CaptureQueriesContext(connection) as plain:
        pages_discover(project=project, links=[Link(u, 1) for u in urls])
    with CaptureQueriesContext(connection) as tagged:
        pages_discover(project=project, links=[Link(u, 1, request={"itag": "v1"}) for u in urls])
    assert len(tagged) == len(plain) + 1


def test_the_fetch_sends_a_requests_cookies_with_the_projects(project):
    """On the project's own site; elsewhere the request's own cookies go alone."""
    project.cookies, project.allowed_domains = {"session": "abc"}, "a.test"
    project_config_changed(project)
    request = {"method": "POST", "body": "a=1", "headers": {"X-Api-Key": "k"}, "cookies": {"pref": "dark"}}
    sent = build_request(project, Page(project=project, url="http://a.test/form", request=request))
    assert (sent.method, sent.body, sent.headers["X-Api-Key"]) == ("POST", b"a=1", "k")
    assert sorted(sent.headers["Cookie"].split("; ")) == ["pref=dark", "session=abc"]
    elsewhere = build_request(project, Page(project=project, url="http://b.test/form", request=request))
    assert elsewhere.headers["Cookie"] == "pref=dark"


# The Request and the Response, pure


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "FETCH"}, "unknown method 'FETCH'"),
        ({"meta": {"when": timezone.now()}}, "meta must be JSON-serialisable"),
        ({"meta": {"n": float("nan")}}, "meta must be JSON-serialisable"),
        ({"meta": {"notes": "x" * 4100}}, "meta is 4113 bytes as JSON, over 4096"),
        ({"meta": ["not", "a", "dict"]}, "meta must be a dict"),
        ({"headers": {"X-Count": 1}}, "headers must map str to str"),
        ({"headers": {"X-Evil": "a\r\nHost: b"}}, "header 'X-Evil' has characters"),
        ({"headers": [("X-A", "b")]}, "headers must be a dict"),
        ({"cookies": {"a": "1; b=2"}}, "cookie 'a' has characters"),
        ({"body": "q=1"}, "a GET request has no body"),
        ({"method": "POST", "data": {"a": 1}, "json": {"a": 1}}, "not data and json"),
        ({"method": "POST", "body": b"\xff\xfe"}, "body must be UTF-8"),
        ({"priority": 40000}, "priority must be an int"),
        ({"age": -1}, "age must be a number of seconds"),
        ({"itag": "x" * 65}, "itag must be a str"),
        ({"route": "not a name"}, "route must name a handler method"),
    ],
)
def test_it_refuses_a_request_it_cannot_send_or_store(kwargs, message):
    with pytest.raises(RequestError, match=message.replace("(", r"\(")):
        Request("/x", **kwargs)


def test_it_encodes_form_data_and_json_bodies_with_their_content_type():
    form = Request("/f", method="post", data={"q": "desk lamp", "tag": ["a", "b"]})
    assert (form.method, form.body) == ("POST", b"q=desk+lamp&tag=a&tag=b")
    assert form.headers == {"Content-Type": "application/x-www-form-urlencoded"}
    api = Request("/api", method="POST", json={"q": "lamps"}, headers={"content-type": "application/vnd.x+json"})
    assert (api.body, api.headers) == (b'{"q": "lamps"}', {"content-type": "application/vnd.x+json"})


def test_it_stores_only_what_differs_from_a_plain_get_and_reads_it_back():
    request = Request(
        "https://a.test/api", 5, method="POST", body="{}", cookies={"s": "1"}, route="page", meta={"n": 1}, age=0
    )
    stored = request.page_request()
    assert stored == {
        "method": "POST",
        "body": "{}",
        "cookies": {"s": "1"},
        "route": "page",
        "meta": {"n": 1},
        "age": 0,
    }
    assert Request.from_page_request("https://a.test/api", stored, 5) == request
    assert Follow("https://a.test/").page_request() == {}


class Routing(Spider):
    name = "routing"

    @route(r"/api/")
    def by_url(self, response):
        yield {"handler": "by_url"}

    def answer(self, response):
        yield {"handler": "answer", "meta": response.meta, "method": response.request.method}

    @route(r"/page")
    def page(self, response):
        yield Request("/api/a", method="POST", json={"a": 1}, route=self.answer, meta={"from": "page"})
        yield Request("/api/a", method="POST", json={"a": 2}, route="answer")
        yield Request("/api/a", method="POST", json={"a": 1})  # the same request again: once
        yield Follow("/api/a")

    @route(r"/typo")
    def typo(self, response):
        yield Request("/api/b", route="anwser")


def test_a_requests_route_and_meta_reach_the_handler_it_names():
    request = Request("https://a.test/api/a", method="POST", route="answer", meta={"from": "page"})
    response = Response("https://a.test/api/a", 200, {"Content-Type": "application/json"}, b"{}", request=request)
    assert run_spider(Routing(), response).items == [{"handler": "answer", "meta": {"from": "page"}, "method": "POST"}]
    plain = Response("https://a.test/api/a", 200, {"Content-Type": "text/html"}, b"<p>")
    assert run_spider(Routing(), plain).items == [{"handler": "by_url"}]
    assert plain.meta == {} and plain.request.method == "GET"


def test_it_keeps_each_request_once_by_url_method_and_body():
    result = run_spider(Routing(), Response("https://a.test/page", 200, {}, b""))
    assert [(r.url, r.method, r.body, r.route) for r in result.requests] == [
        ("https://a.test/api/a", "POST", b'{"a": 1}', "answer"),
        ("https://a.test/api/a", "POST", b'{"a": 2}', "answer"),
        ("https://a.test/api/a", "GET", None, None),
    ]
    assert result.follow == ["https://a.test/api/a"]


def test_a_route_that_names_no_handler_fails_the_page_with_a_traceback():
    result = run_spider(Routing(), Response("https://a.test/typo", 200, {}, b""))
    assert result.error == "spider_error: SpiderError: route 'anwser' is not a handler method of Routing"
    assert result.log[-1].level == "ERROR" and "Traceback" in result.log[-1].message


def test_soup_parses_the_body_with_its_charset_lazily():
    body = "<html><body><h1>Caf\xe9</h1><p class='x'>a</p></body></html>".encode("latin-1")
    response = Response("https://a.test/", 200, {"Content-Type": "text/html; charset=ISO-8859-1"}, body)
    assert "soup" not in vars(response)
    assert response.soup.h1.get_text() == "Café"
    assert [p.get_text() for p in response.soup.select("p.x")] == ["a"]


def test_the_example_api_spider_posts_each_query_with_its_key_and_reads_the_answer():
    search = Response("https://shop.test/search", 200, {"Content-Type": HTML}, SEARCH_PAGE)
    requests = run_spider(ExampleApiSpider(), search).requests
    assert [(r.method, r.body, r.headers["X-Api-Key"], r.meta) for r in requests] == [
        ("POST", b'{"q": "lamps"}', API_KEY, {"query": "lamps"}),
        ("POST", b'{"q": "desks"}', API_KEY, {"query": "desks"}),
    ]
    body = json.dumps({"results": RESULTS["desks"]}).encode()
    answer = Response(requests[1].url, 200, {"Content-Type": "application/json"}, body, request=requests[1])
    result = run_spider(ExampleApiSpider(), answer)
    assert result.items == [{"kind": "result", "query": "desks", "rank": 1, "title": "Oak desk", "price": 400.0}]
    assert [line.message for line in result.log] == ["1 results for 'desks'"]


def test_the_debugger_shows_what_a_handler_logged(db, admin_client, logging_site):
    from io import StringIO

    from django.core.management import call_command

    project = project_get_or_create(name="logs", allow_private=True, obey_robots=False, spider=LoggingSpider.name)
    out = StringIO()
    call_command("tryurl", f"{logging_site.url}/fine", "--project", project.slug, stdout=out)
    assert f"[handler log]\n  INFO: parsing {logging_site.url}/fine" in out.getvalue()
    shown = admin_client.post("/admin/tryurl/", {"url": f"{logging_site.url}/broken", "project": project.id})
    html = shown.content.decode()
    assert "What the spider's handler logged" in html and "about to fail" in html and "KeyError" in html
