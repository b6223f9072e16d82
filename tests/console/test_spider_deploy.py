"""Deploying spider code through the API and the admin, by role: only the admin role holds
scrape.deploy_spider; viewers and operators read versions and get 403 for deploy and activate.
A refused deploy says its line and saves nothing."""

import pytest
from django.contrib.auth.models import Group
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from console.models import ProjectAccess
from crawl.models import Project
from scrape.models import SpiderVersion
from scrape.spider_versions import spider_version_active, spider_version_deploy

pytestmark = pytest.mark.django_db
SOURCE = """from scrape.spiders import Spider


class Shop(Spider):
    name = "shop"

    def default(self, response):
        yield {"url": response.url, "v": VERSION}


VERSION = 1
"""
BROKEN = SOURCE.replace('name = "shop"', 'name = "shop" +')


@pytest.fixture
def shop():
    project = Project.objects.create(name="shop", slug="shop")
    ProjectAccess.objects.create(project=project, group=Group.objects.create(name="team-a"))
    Project.objects.create(name="other", slug="other")
    return project


@pytest.fixture
def member(django_user_model):
    def make(role: str):
        user = django_user_model.objects.create_user(f"{role}-user", password="x", is_staff=True)
        user.groups.add(*Group.objects.filter(name__in=[role, "team-a"]))
        return user

    return make


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


URL = "/api/projects/shop/spider-versions/"


def test_the_admin_role_deploys_lists_and_rolls_back_through_the_api(shop, member):
    client = api(member("admin"))
    first = client.post(URL, {"source": SOURCE, "message": "first"}, format="json")
    assert first.status_code == 201, first.content
    assert (first.json()["number"], first.json()["active"], first.json()["created_by"]) == (1, True, "admin-user")
    assert client.post(URL, {"source": SOURCE.replace("= 1", "= 2")}, format="json").status_code == 201
    listed = client.get(URL).json()
    assert [(v["number"], v["active"]) for v in listed] == [(2, True), (1, False)]
    assert client.get(f"{URL}1/").json()["source"] == SOURCE
    assert client.post(f"{URL}1/activate/").json()["active"] is True
    assert spider_version_active(Project.objects.get(slug="shop")).number == 1
    assert client.get("/api/projects/other/spider-versions/").status_code == 404, "another team's project"


def test_a_refused_deploy_is_a_400_with_its_line_and_saves_nothing(shop, member):
    client = api(member("admin"))
    refused = client.post(URL, {"source": BROKEN}, format="json")
    assert refused.status_code == 400
    assert refused.json()["line"] == 5 and refused.json()["detail"].startswith("line 5: syntax error")
    assert SpiderVersion.objects.count() == 0 and Project.objects.get(slug="shop").spider_version_id is None


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_viewers_and_operators_read_versions_but_get_403_for_deploy_and_activate(shop, member, role):
    spider_version_deploy(project=shop, source=SOURCE)
    client = api(member(role))
    assert client.get(URL).status_code == 200
    assert client.post(URL, {"source": SOURCE.replace("= 1", "= 2")}, format="json").status_code == 403
    assert client.post(f"{URL}1/activate/").status_code == 403
    assert SpiderVersion.objects.count() == 1


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_viewers_and_operators_get_403_for_deploy_and_no_activate_in_the_admin(shop, member, client, role):
    version = spider_version_deploy(project=shop, source=SOURCE)
    spider_version_deploy(project=shop, source=SOURCE.replace("= 1", "= 2"))
    client.force_login(member(role))
    assert client.get("/admin/scrape/spiderversion/").status_code == 200
    assert client.get("/admin/scrape/spiderversion/add/").status_code == 403
    posted = client.post("/admin/scrape/spiderversion/add/", {"project": shop.id, "source": SOURCE, "message": "x"})
    assert posted.status_code == 403
    client.post("/admin/scrape/spiderversion/", {"action": "activate", "_selected_action": [version.id]})
    assert spider_version_active(Project.objects.get(slug="shop")).number == 2, "not rolled back"
    assert SpiderVersion.objects.count() == 2


def test_the_admin_deploys_refuses_with_the_line_and_rolls_back(shop, member, client):
    client.force_login(member("admin"))
    refused = client.post("/admin/scrape/spiderversion/add/", {"project": shop.id, "source": BROKEN})
    assert refused.status_code == 200 and "line 5: syntax error" in refused.content.decode()
    assert SpiderVersion.objects.count() == 0
    for number in (1, 2):
        source = SOURCE.replace("= 1", f"= {number}")
        done = client.post("/admin/scrape/spiderversion/add/", {"project": shop.id, "source": source, "message": "m"})
        assert done.status_code == 302, done.content.decode()[:2000]
    assert spider_version_active(Project.objects.get(slug="shop")).number == 2
    first = SpiderVersion.objects.get(number=1)
    client.post("/admin/scrape/spiderversion/", {"action": "activate", "_selected_action": [first.id]})
    assert spider_version_active(Project.objects.get(slug="shop")).number == 1
    assert client.get(f"/admin/scrape/spiderversion/{first.id}/change/").status_code == 200


def test_the_admins_deploy_form_edits_the_source_in_the_ace_editor(shop, member, client):
    client.force_login(member("admin"))
    html = client.get("/admin/scrape/spiderversion/add/").content.decode()
    assert 'class="django-ace-widget' in html and "/static/django_ace/ace/ace.js" in html
    assert 'data-mode="python"' in html
