"""A browser only where a page needs one, with real workers (the render queue) and a loopback shop:
a rule set in auto mode renders its route once a sample shows the browser finds more, the others
stay plain; page actions (scroll, click) load what a page only shows to a visitor who acts."""

import re
import shutil

import pytest

from bench.check import canon_path
from crawl.models import Page
from crawl.services.projects import project_get_or_create
from scrape.models import Item, RenderRoute, RuleSet
from tests.conftest import run_manage
from tests.servers import Site, SiteServer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed"),
]
HTML = {"Content-Type": "text/html; charset=utf-8"}
JSON = {"Content-Type": "application/json"}
CATEGORIES, PRODUCTS = 3, 4
INTRO = "<p>" + "Our finest goods, hand picked for you every season. " * 6 + "</p>"


def category(n: int) -> bytes:
    """Its product links are built by a script: a plain fetch sees none."""
    ids = [f"{n}-{i}" for i in range(PRODUCTS)]
    return f"""<html><body><h1>Category {n}</h1>{INTRO}<ul id="list"></ul><script>
for (const id of {ids!r}) {{
  const li = document.createElement("li"), a = document.createElement("a");
  a.href = "/product/" + id; a.textContent = "product " + id; li.appendChild(a);
  document.getElementById("list").appendChild(li);
}}
</script><a href="/">home</a></body></html>""".encode()


def shop() -> Site:
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    links = "".join(f'<a href="/category/{n}">category {n}</a>' for n in range(CATEGORIES))
    site.files["/"] = (200, HTML, f"<html><body>{links}</body></html>".encode())
    for n in range(CATEGORIES):
        site.files[f"/category/{n}"] = (200, HTML, category(n))
        for i in range(PRODUCTS):
            body = f"<html><body><h1>Product {n}-{i}</h1><span class=price>{n}.{i}</span></body></html>"
            site.files[f"/product/{n}-{i}"] = (200, HTML, body.encode())
    return site


def rendered_paths(workers) -> list[str]:
    """What the render worker's Chromium loaded, from its log."""
    text = (workers.log_dir / "render.log").read_text()
    return [canon_path(url) for url in re.findall(r"rendered (\S+) in Chromium", text)]


def start_workers(workers) -> None:
    # The tests' 10 s lease can run out while a loaded machine starts Chromium: the reaper would hand
    # the pages to the render stage again and the count of renders would say nothing.
    workers.env["CRAWL_LEASE_SECONDS"] = "60"
    # One sample decides: the other category pages, fetched plainly meanwhile, must go to the browser.
    workers.env["CRAWL_RENDER_AUTO_SAMPLES"] = "1"
    for stage in ("fetch", "extract", "download", "render"):
        workers.start(stage, stage, concurrency=1)


def crawl(server, name: str, worker_env, *paths: str) -> None:
    urls = [f"{server.url}{path}" for path in paths]
    done = run_manage(["crawl", *urls, "--workers", "0", "--project", name, "--timeout", "120"], worker_env)
    assert done.returncode == 0, done.stdout + done.stderr


def test_it_renders_only_the_auto_route_whose_links_need_a_browser(workers, worker_env):
    start_workers(workers)
    project = project_get_or_create(name="shop", allow_private=True)
    RuleSet.objects.create(project=project, name="category", spec={"url_patterns": ["/category/"], "render": "auto"})
    product = {"css": "h1"}, {"css": ".price", "type": "float"}
    spec = {"url_patterns": ["/product/"], "render": "auto", "fields": {"name": product[0], "price": product[1]}}
    RuleSet.objects.create(project=project, name="product", spec=spec)
    with SiteServer(shop()) as server:
        crawl(server, "shop", worker_env, "/")

    rendered = rendered_paths(workers)
    print("rendered:", sorted(rendered))
    assert sorted(set(rendered)) == [f"/category/{n}" for n in range(CATEGORIES)], "only the category pages"
    assert len(rendered) == CATEGORIES, "each category page rendered once"
    names = sorted(Item.objects.filter(project=project, kind="rule:product").values_list("data__name", flat=True))
    assert names == sorted(f"Product {n}-{i}" for n in range(CATEGORIES) for i in range(PRODUCTS))
    assert set(Page.objects.filter(project=project).values_list("state", flat=True)) == {"done"}
    routes = {r.route: r for r in RenderRoute.objects.filter(project=project)}
    print({k: (r.decision, r.reason) for k, r in routes.items()})
    assert routes["rule:category"].decision == "render"
    assert "rendered sample found 4 links the plain page lacks" in routes["rule:category"].reason
    assert routes["rule:category"].evidence_url.startswith(f"{server.url}/category/")
    assert routes["rule:product"].decision == "static"


FEED_PAGES, CLICKS, PER_LOAD = 5, 3, 10
LOADER = """<script>
let loads = 0, busy = false;
async function more() {
  if (busy) return; busy = true;
  const answer = await fetch("%(api)s?n=" + (loads + 1)); const names = await answer.json();
  loads += 1; busy = false;
  for (const name of names) {
    const li = document.createElement("li"); li.className = "item"; li.textContent = name;
    document.getElementById("items").appendChild(li);
  }
  %(after)s
}
%(trigger)s
</script>"""
SCROLL = (
    "window.addEventListener('scroll', () => { if (innerHeight + scrollY >= document.body.scrollHeight - 5) more(); });"
)
CLICK = "document.getElementById('more').addEventListener('click', more);"
LAST_CLICK = f"if (loads >= {CLICKS}) document.getElementById('more').remove();"


def loads(prefix: str, last: int):
    def answer(request):
        n = int(request.path.rsplit("=", 1)[1])
        names = [f"{prefix} {n}-{i}" for i in range(PER_LOAD)] if n <= last else []
        return 200, JSON, str(names).replace("'", '"').encode()

    return answer


def endless_site() -> Site:
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    tall = '<div style="height:3000px">top</div>'
    feed = LOADER % {"api": "/feed/api", "after": "", "trigger": SCROLL}
    site.files["/feed"] = (200, HTML, f'<html><body>{tall}<ul id="items"></ul>{feed}</body></html>'.encode())
    site.files["/feed/api"] = loads("post", FEED_PAGES)
    button = '<button id="more">load more</button>'
    more = LOADER % {"api": "/more/api", "after": LAST_CLICK, "trigger": CLICK}
    site.files["/more"] = (200, HTML, f'<html><body><ul id="items"></ul>{button}{more}</body></html>'.encode())
    site.files["/more/api"] = loads("thing", CLICKS)
    return site


def test_page_actions_scroll_and_click_load_every_item(workers, worker_env):
    start_workers(workers)
    project = project_get_or_create(name="endless", allow_private=True)
    item = {"item_selector": "li.item", "fields": {"name": {"css": "li"}}}
    scroll = [{"action": "scroll", "max": 20, "idle_ms": 3000}]
    click = [{"action": "click", "selector": "#more", "max": 10, "idle_ms": 3000}]
    for name, path, actions in (("feed", "/feed$", scroll), ("more", "/more$", click)):
        spec = {"url_patterns": [path], "render": "always", "actions": actions, **item}
        RuleSet.objects.create(project=project, name=name, spec=spec)
    with SiteServer(endless_site()) as server:
        crawl(server, "endless", worker_env, "/feed", "/more")
        asked = server.paths()

    def names(kind):
        return set(Item.objects.filter(project=project, kind=kind).values_list("data__name", flat=True))

    assert names("rule:feed") == {f"post {n}-{i}" for n in range(1, FEED_PAGES + 1) for i in range(PER_LOAD)}
    assert names("rule:more") == {f"thing {n}-{i}" for n in range(1, CLICKS + 1) for i in range(PER_LOAD)}
    assert sorted(p for p in asked if p.startswith("/more/api")) == [f"/more/api?n={n}" for n in range(1, 4)]
    assert sorted(rendered_paths(workers)) == ["/feed", "/more"], "each seed fetched plainly, then rendered once"
