"""What robots.txt `Sitemap:` lines may do to a project: add a capped number of crawlable sitemap
seeds on the project's own sites, and nothing else. The project's site is on 127.0.0.3, another
site on 127.0.0.2 (both stand for public hosts: allowed networks here)."""

import pytest
from django.conf import settings

from core.canonical import Scope, host_of
from core.net.guard import allow_networks
from crawl.models import Page, Project, Seed
from crawl.policy import project_scope
from crawl.services.projects import seeds_add
from fetch.services import pages_fetch
from tests.console.test_permissions import change_form_data
from tests.servers import Site, SiteServer

pytestmark = pytest.mark.django_db
HTML = {"Content-Type": "text/html; charset=utf-8"}
SITEMAP = b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"></urlset>'


@pytest.fixture
def servers():
    allow_networks(["127.0.0.2/32", "127.0.0.3/32"])
    try:
        own, other = Site(default=(200, HTML, b"<html><body>ok</body></html>")), Site(default=(200, HTML, b""))
        other.files["/robots.txt"] = (404, HTML, b"")
        with SiteServer(own, host="127.0.0.3") as own_server, SiteServer(other, host="127.0.0.2") as other_server:
            yield own_server, other_server
    finally:
        allow_networks(settings.CRAWL_ALLOWED_NETWORKS)


def crawl_with_robots(server: SiteServer, robots: str, **fields) -> Project:
    """A project of the server's site whose robots.txt says `robots`, its seed fetched (and the
    sitemaps that makes queued fetched too)."""
    server.site.files["/robots.txt"] = (200, {"Content-Type": "text/plain"}, robots.encode())
    server.site.files["/sitemap.xml"] = (200, {"Content-Type": "application/xml"}, SITEMAP)
    project = Project.objects.create(name="robots", slug="robots", **fields)
    seeds_add(project=project, urls=[f"{server.url}/"])
    for _ in range(2):
        pages_fetch(page_ids=list(Page.objects.filter(project=project, state="queued").values_list("id", flat=True)))
    project.refresh_from_db()  # the seeds robots.txt offered moved its change stamp
    return project


def sitemap_seeds(project: Project) -> list[str]:
    return sorted(project.seeds.filter(kind="sitemap").values_list("url", flat=True))


def test_a_sitemap_line_that_cannot_be_parsed_is_not_kept_and_the_scope_still_builds(servers):
    own, _ = servers
    robots = f"User-agent: *\nSitemap: http://[bad\nSitemap: javascript:alert(1)\nSitemap: {own.url}/sitemap.xml\n"
    project = crawl_with_robots(own, robots)
    assert sitemap_seeds(project) == [f"{own.url}/sitemap.xml"]
    assert project_scope(project).domains == ("127.0.0.3",)


def test_a_seed_that_cannot_be_parsed_breaks_no_scope_check_nor_try_a_url(servers, admin_client):
    own, _ = servers
    project = Project.objects.create(name="bad", slug="bad", allow_private=True)
    Seed.objects.bulk_create(
        [Seed(project=project, url="http://[bad", kind="sitemap"), Seed(project=project, url=own.url)]
    )
    assert project_scope(project).domains == ("127.0.0.3",)
    tried = admin_client.post("/admin/tryurl/", {"url": f"{own.url}/", "project": project.id})
    assert tried.status_code == 200


@pytest.mark.parametrize("url", ["http://[bad", "http://[bad/x", "http://[::1/"])
def test_a_url_that_cannot_be_parsed_is_off_every_site_and_never_raises(url):
    assert host_of(url) == ""
    assert Scope.build(domains=["a.test"]).rejects(url, 0) == "offsite"


@pytest.mark.parametrize("follow", [False, True], ids=["offered", "followed"])
def test_robots_sitemap_lines_never_widen_the_scope(servers, follow):
    own, other = servers
    robots = f"User-agent: *\nSitemap: {other.url}/sitemap.xml\nSitemap: {own.url}/sitemap.xml\n"
    project = crawl_with_robots(own, robots, follow_sitemaps=follow)
    assert sitemap_seeds(project) == [f"{own.url}/sitemap.xml"]
    assert project_scope(project).domains == ("127.0.0.3",)
    assert other.paths() == [], "the other site was never fetched"
    assert ("/sitemap.xml" in own.paths()) is follow


def test_a_robots_txt_of_many_sitemap_lines_adds_a_capped_number_of_seeds(servers, settings):
    own, _ = servers
    settings.CRAWL_MAX_ROBOTS_SITEMAPS = 5
    robots = "User-agent: *\n" + "".join(f"Sitemap: {own.url}/sitemap-{n}.xml\n" for n in range(500))
    project = crawl_with_robots(own, robots)
    assert len(sitemap_seeds(project)) == 5


def test_a_project_whose_robots_txt_names_many_sitemaps_keeps_a_form_that_saves(servers, admin_client, settings):
    own, _ = servers
    settings.CRAWL_MAX_ROBOTS_SITEMAPS = 200
    robots = "User-agent: *\n" + "".join(f"Sitemap: {own.url}/sitemap-{n}.xml\n" for n in range(150))
    project = crawl_with_robots(own, robots)
    assert len(sitemap_seeds(project)) == 150
    form = admin_client.get(f"/admin/crawl/project/{project.id}/change/")
    html = form.content.decode()
    assert "150 (0 followed" in html and f"{own.url}/sitemap-149.xml" not in html
    saved = admin_client.post(f"/admin/crawl/project/{project.id}/change/", change_form_data(form) | {"max_depth": "7"})
    assert saved.status_code == 302, saved.status_code
    assert Project.objects.get(id=project.id).max_depth == 7 and len(sitemap_seeds(project)) == 150


def test_a_javascript_url_in_robots_txt_never_becomes_a_page(servers):
    own, _ = servers
    robots = "User-agent: *\nSitemap: javascript:alert(document.domain)\nSitemap: JAVASCRIPT:alert(1)\n"
    project = crawl_with_robots(own, robots, follow_sitemaps=True)
    urls = list(Page.objects.filter(project=project).values_list("url", flat=True))
    assert urls and not [u for u in urls if not u.startswith("http")], urls
    assert sitemap_seeds(project) == []
