"""The console's defences against other sites and other teams: no framing, no referrer elsewhere,
cookies out of scripts' reach, CSRF on every write (a POST from another origin of the same site
too), stored files that could run script never served inline, a foreign id in a bulk action or the
overview's control changing nothing, and export file names made of the slug only."""

import hashlib

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from console.access.roles import roles_install
from console.models import ProjectAccess
from core.storage import store_file
from crawl.models import MediaAsset, Project

pytestmark = pytest.mark.django_db
PASSWORD = "correct-horse-battery-staple"


@pytest.fixture
def two_teams(django_user_model):
    """Project "mine" owned by the operator's team, project "theirs" by another team."""
    roles_install()
    mine, theirs = (
        Project.objects.create(name="mine", slug="mine"),
        Project.objects.create(name="theirs", slug="theirs"),
    )
    team, other = Group.objects.create(name="team"), Group.objects.create(name="rival-team")
    ProjectAccess.objects.create(project=mine, group=team)
    ProjectAccess.objects.create(project=theirs, group=other)
    user = django_user_model.objects.create_user("operator", password=PASSWORD, is_staff=True)
    user.groups.add(team, Group.objects.get(name="operator"))
    return user, mine, theirs


def logged_in(csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.get("/admin/login/")
    token = client.cookies["csrftoken"].value
    response = client.post(
        "/admin/login/", {"username": "operator", "password": PASSWORD, "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302, "logged in"
    return client


def test_console_pages_cannot_be_framed_and_keep_their_referrer_to_the_console(two_teams):
    response = logged_in().get("/admin/")
    assert response["X-Frame-Options"] == "DENY"
    assert response["Referrer-Policy"] == "same-origin"
    assert "frame-ancestors 'none'" in response["Content-Security-Policy"]


def test_the_session_and_csrf_cookies_are_out_of_scripts_reach_or_same_site(two_teams):
    client = logged_in()
    session = client.cookies["sessionid"]
    assert session["httponly"] and session["samesite"] == "Lax"
    assert client.cookies["csrftoken"]["samesite"] == "Lax"


def test_a_write_without_the_csrf_token_or_from_another_origin_is_refused(two_teams):
    _, mine, _ = two_teams
    client = logged_in(csrf=True)
    token = client.cookies["csrftoken"].value
    control = {"project": mine.id, "action": "pause", "csrfmiddlewaretoken": token}
    assert client.post("/admin/dashboard/control/", {"project": mine.id, "action": "pause"}).status_code == 403
    same_site = client.post("/admin/dashboard/control/", control, headers={"Origin": "http://evil.localhost:8000"})
    assert same_site.status_code == 403, "another origin of the same site, even with the token"
    assert Project.objects.get(id=mine.id).status == "active"


def test_a_bulk_action_or_the_overview_control_with_a_foreign_id_changes_nothing_of_it(two_teams):
    _, mine, theirs = two_teams
    client = logged_in()
    client.post("/admin/crawl/project/", {"action": "pause", "_selected_action": [mine.id, theirs.id]})
    assert Project.objects.get(id=theirs.id).status == "active"
    assert client.post("/admin/dashboard/control/", {"project": theirs.id, "action": "pause"}).status_code in (400, 404)
    assert Project.objects.get(id=theirs.id).status == "active"


@pytest.mark.parametrize("mime", ["image/svg+xml", "text/html", "application/xhtml+xml", "text/xml"])
def test_a_stored_file_that_could_run_script_is_served_as_a_download(two_teams, tmp_path, mime):
    _, mine, _ = two_teams
    data = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    (tmp_path / "f").write_bytes(data)
    sha256 = hashlib.sha256(data).hexdigest()
    key = store_file(str(tmp_path / "f"), sha256=sha256, size=len(data))
    asset = MediaAsset.objects.create(project=mine, url="http://a.test/x", url_key="9" * 64, state="done", mime=mime)
    MediaAsset.objects.filter(id=asset.id).update(storage_key=key, sha256=sha256, size=len(data))
    response = logged_in().get(f"/admin/media/mediaasset/{asset.id}/object/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"].startswith("attachment")
    assert response["X-Content-Type-Options"] == "nosniff" and "sandbox" in response["Content-Security-Policy"]


def test_an_export_is_named_by_the_slug_whatever_the_projects_name(two_teams):
    _, mine, _ = two_teams
    Project.objects.filter(id=mine.id).update(name='x"; filename="evil.html\r\nX-Evil: 1')
    response = logged_in().get(f"/admin/crawl/project/{mine.id}/export/?format=csv&what=pages")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="mine-pages.csv"'
    assert "X-Evil" not in response


def test_the_owners_list_names_no_other_team(two_teams, django_user_model):
    _, _, theirs = two_teams
    ProjectAccess.objects.create(project=theirs, user=django_user_model.objects.create_user("stranger-name"))
    html = logged_in().get("/admin/console/projectaccess/").content.decode()
    assert "team" in html and "mine" in html
    assert "rival-team" not in html and "stranger-name" not in html and "theirs" not in html
