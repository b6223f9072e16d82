"""A project's cookies and request headers go to its own sites only, seen from the servers' side:
the project's site on 127.0.0.3 gets them, a witness on 127.0.0.2 (another host) never does, whoever
points the crawler at it. Both addresses stand for public hosts (allowed networks here)."""

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from console.access.roles import roles_install
from console.models import ProjectAccess
from core.net.guard import allow_networks
from crawl.hosts.credentials import secrets_go_to
from crawl.models import Page, Project, Seed
from crawl.services.projects import seeds_add
from fetch.services import pages_fetch
from scrape.services import pages_extract
from tests.servers import ForwardProxy, Site, SiteServer

pytestmark = pytest.mark.django_db
HTML = {"Content-Type": "text/html; charset=utf-8"}
COOKIE, TOKEN = "session-s3cret", "Bearer token-s3cret"


def recording_site(host: str) -> SiteServer:
    site = Site(default=(200, HTML, b"<html><head><title>here</title></head><body>ok</body></html>"))
    site.files["/robots.txt"] = (404, HTML, b"")
    return SiteServer(site, host=host)


@pytest.fixture
def servers():
    allow_networks(["127.0.0.2/32", "127.0.0.3/32"])
    try:
        with recording_site("127.0.0.3") as own, recording_site("127.0.0.2") as witness:
            yield own, witness
    finally:
        allow_networks(settings.CRAWL_ALLOWED_NETWORKS)


def carrying_secrets(server: SiteServer) -> list[str]:
    """The paths of the requests that reached `server` with the project's cookie or token."""
    return [r.path for r in server.requests if COOKIE in r.headers.get("Cookie", "") or TOKEN in str(r.headers)]


def team_project(own: SiteServer, **fields) -> Project:
    project = Project.objects.create(
        name="secret", slug="secret", cookies={"session": COOKIE}, request_headers={"Authorization": TOKEN}, **fields
    )
    seeds_add(project=project, urls=[f"{own.url}/"])
    ProjectAccess.objects.create(project=project, group=Group.objects.get_or_create(name="team")[0])
    return project


def user_with(django_user_model, role: str):
    roles_install()
    user = django_user_model.objects.create_user(role, password="x", is_staff=True)
    user.groups.add(Group.objects.get(name=role), Group.objects.get_or_create(name="team")[0])
    return user


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def fetch_queued(project: Project) -> None:
    ids = list(Page.objects.filter(project=project, state="queued").values_list("id", flat=True))
    pages_fetch(page_ids=ids)


def test_an_operators_try_a_url_never_carries_the_projects_secrets_to_another_host(servers, client, django_user_model):
    own, witness = servers
    project = team_project(own)
    client.force_login(user_with(django_user_model, "operator"))
    client.post("/admin/tryurl/", {"url": f"{witness.url}/collect", "project": project.id})
    assert carrying_secrets(witness) == []
    tried = client.post("/admin/tryurl/", {"url": f"{own.url}/account", "project": project.id})
    assert tried.status_code == 200 and carrying_secrets(own) == ["/account"], "its own site still gets them"


def test_an_operators_new_seed_on_another_host_never_carries_the_projects_secrets(servers, django_user_model):
    own, witness = servers
    project = team_project(own)
    api(user_with(django_user_model, "operator")).post(
        "/api/seeds/", {"project": "secret", "url": f"{witness.url}/collect"}, format="json"
    )
    fetch_queued(project)
    assert carrying_secrets(witness) == []
    assert carrying_secrets(own) == ["/"]


def test_an_operator_may_not_point_a_project_holding_secrets_at_another_host(servers, django_user_model):
    own, witness = servers
    team_project(own)
    operator = api(user_with(django_user_model, "operator"))
    refused = operator.post("/api/seeds/", {"project": "secret", "url": f"{witness.url}/collect"}, format="json")
    assert refused.status_code == 403 and "change_network_settings" in refused.json()["detail"]
    assert not Seed.objects.filter(url__startswith=witness.url).exists()
    inside = operator.post("/api/seeds/", {"project": "secret", "url": f"{own.url}/more"}, format="json")
    assert inside.status_code == 201, inside.content


def test_an_operator_may_not_send_another_hosts_requests_through_the_projects_proxy(servers, client, django_user_model):
    own, witness = servers
    proxy = ForwardProxy(username="crawler", password="proxy-s3cret")
    try:
        project = Project.objects.create(
            name="proxied", slug="proxied", proxy=proxy.url(credentials="crawler:proxy-s3cret")
        )
        ProjectAccess.objects.create(project=project, group=Group.objects.get_or_create(name="team")[0])
        Seed.objects.create(project=project, url=f"{own.url}/")
        client.force_login(user_with(django_user_model, "operator"))
        refused = client.post("/admin/tryurl/", {"url": f"{witness.url}/collect", "project": project.id})
        assert refused.status_code == 403 and "change_network_settings" in refused.content.decode()
        assert (
            api(django_user_model.objects.get(username="operator"))
            .post("/api/seeds/", {"project": "proxied", "url": f"{witness.url}/collect"}, format="json")
            .status_code
            == 403
        )
    finally:
        proxy.close()
    assert proxy.accepted == 0 and witness.requests == []


def test_a_seed_off_the_allowed_domains_is_fetched_without_the_secrets(servers):
    own, witness = servers
    project = team_project(own, allowed_domains="127.0.0.3")
    seeds_add(project=project, urls=[f"{witness.url}/elsewhere"])
    fetch_queued(project)
    assert carrying_secrets(witness) == [] and witness.paths()[-1] == "/elsewhere"
    assert carrying_secrets(own) == ["/"]


@pytest.mark.parametrize(
    ("url", "domains", "goes"),
    [
        ("http://shop.test/a", ("shop.test",), True),
        ("http://www.shop.test/a", ("shop.test",), True),
        ("http://evilshop.test/a", ("shop.test",), False),
        ("http://shop.test.evil.test/a", ("shop.test",), False),
        ("http://shop.test/a", (), False),
        ("http://[bad/a", ("shop.test",), False),
    ],
)
def test_secrets_go_to_the_domains_they_are_bound_to_and_their_subdomains(url, domains, goes):
    assert secrets_go_to(url, domains) is goes


def test_a_seeds_own_headers_do_not_follow_a_redirect_to_another_host(servers):
    """Both hosts are in scope: the redirect is followed, the seed's key stays with its own host."""
    own, witness = servers
    own.site.files["/moved"] = (302, {"Location": f"{witness.url}/landing"}, b"")
    project = Project.objects.create(name="hops", slug="hops", allowed_domains="127.0.0.3\n127.0.0.2")
    Seed.objects.create(project=project, url=f"{own.url}/moved", headers={"X-Api-Key": "seed-s3cret"})
    seeds_add(project=project, urls=[])
    for _ in range(3):
        fetch_queued(project)
        fetched = Page.objects.filter(project=project, state="fetched").values_list("id", flat=True)
        pages_extract(page_ids=list(fetched))
    assert witness.paths() == ["/robots.txt", "/landing"]
    assert not [r for r in witness.requests if "seed-s3cret" in str(r.headers)]
    assert [r.headers.get("X-Api-Key") for r in own.requests if r.path == "/moved"] == ["seed-s3cret"]
