"""JavaScript rendering as a pipeline stage: pages of a render_js project go to the render queue and
its worker's headless Chromium; links a script inserts are found only with rendering on."""

import shutil

import pytest

from bench.check import canon_path
from crawl.models import Page
from crawl.services.projects import project_get_or_create
from tests.conftest import run_manage
from tests.servers import Site, SiteServer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed"),
]
HTML = {"Content-Type": "text/html; charset=utf-8"}
SCRIPTED = b"""<html><body><p>static</p><script>
for (const p of ["/js-a.html", "/js-b.html"]) {
  const a = document.createElement("a"); a.href = p; a.textContent = p; document.body.appendChild(a);
}
</script></body></html>"""


def scripted_site() -> Site:
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    site.files["/"] = (200, HTML, SCRIPTED)
    site.files["/js-a.html"] = (200, HTML, b"<html><body>a</body></html>")
    site.files["/js-b.html"] = (200, HTML, b"<html><body>b</body></html>")
    return site


def test_script_inserted_links_are_followed_only_with_rendering_on(workers, worker_env):
    for stage in ("fetch", "extract", "download", "render"):
        workers.start(stage, stage, concurrency=1)
    with SiteServer(scripted_site()) as server:
        for name, render in (("plain", False), ("rendered", True)):
            project_get_or_create(name=name, allow_private=True, render_js=render)
            done = run_manage(
                ["crawl", f"{server.url}/", "--workers", "0", "--project", name, "--timeout", "120"], worker_env
            )
            assert done.returncode == 0, done.stdout + done.stderr

    def done_paths(name):
        return {
            canon_path(u) for u in Page.objects.filter(project__slug=name, state="done").values_list("url", flat=True)
        }

    assert done_paths("plain") == {"/"}
    assert done_paths("rendered") == {"/", "/js-a.html", "/js-b.html"}
    rendered_by = set(Page.objects.filter(project__slug="rendered").values_list("fetched_by", flat=True))
    assert {w.split("@")[0] for w in rendered_by} == {"render"}, "the render queue's worker fetched them"
