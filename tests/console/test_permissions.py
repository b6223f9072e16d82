"""Roles and per-project access on the real database, through the real API, admin and dashboard:
two teams each own a project; a member sees and steers only their team's, network settings need
their own permission, and stored secrets never come back."""

import re

import pytest
from django.contrib.auth.models import Group, Permission
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from console.access.roles import roles_install
from console.api.urls import router
from console.models import Job, ProjectAccess
from console.runs.jobs import job_begin
from core.canonical import url_key
from crawl.models import MediaAsset, Page, PageVersion, Project, Seed
from scrape.models import Item
from sinks.models import Sink
from tests.console.test_admin_console import add_form_data
from tests.servers import Site, SiteServer

pytestmark = pytest.mark.django_db

COOKIE, HEADER, PASSWORD, SEED_HEADER = "cookie-s3cret", "header-s3cret", "proxy-s3cret", "seed-s3cret"
SECRETS = (COOKIE, HEADER, PASSWORD, SEED_HEADER)
NETWORK = "console.change_network_settings"
HTML = {"Content-Type": "text/html; charset=utf-8"}


def team_project(slug: str, team: Group) -> Project:
    """A project owned by `team`, with secrets and a row of every kind."""
    project = Project.objects.create(
        name=slug, slug=slug, cookies={"session": COOKIE}, request_headers={"Authorization": HEADER},
        proxy=f"http://crawler:{PASSWORD}@proxy.test:3128",
    )  # fmt: skip
    ProjectAccess.objects.create(project=project, group=team)
    Seed.objects.create(project=project, url=f"http://{slug}.test/", headers={"X-Token": SEED_HEADER})
    url = f"http://{slug}.test/failed"
    page = Page.objects.create(project=project, url=url, url_key=url_key(url), host=f"{slug}.test", state="failed")
    PageVersion.objects.create(page=page, title=f"{slug} version", text="t", text_hash="h", fetched_at=timezone.now())
    Item.objects.create(project=project, page=page, kind="page", data={"title": slug})
    MediaAsset.objects.create(project=project, url=f"http://{slug}.test/a.png", url_key=url_key(slug))
    Sink.objects.create(project=project, name="out", kind="redis", config={"url": f"redis://:{PASSWORD}@r.test/0"})
    job_begin(project=project, kind=Job.Kind.CRAWL, trigger=Job.Trigger.API)
    return project


@pytest.fixture
def teams():
    a, b = Group.objects.create(name="team-a"), Group.objects.create(name="team-b")
    return team_project("a", a), team_project("b", b)


@pytest.fixture
def member(django_user_model):
    """member(role, team="team-a", **flags): a user with that role (a group name, or None) in that team."""

    def make(role: str | None, team: str | None = "team-a", **flags):
        name = f"{role}-{team}-{django_user_model.objects.count()}"
        user = django_user_model.objects.create_user(name, password="x", **flags)
        user.groups.add(*Group.objects.filter(name__in=[role, team]))
        return user

    return make


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def ids(response) -> list:
    assert response.status_code == 200, response.content
    return [row.get("slug", row.get("id")) for row in response.json()["results"]]


# --- Roles -----------------------------------------------------------------------------------------


def test_the_roles_are_groups_kept_in_step_with_the_code():
    Group.objects.get(name="viewer").permissions.clear()
    roles_install()
    roles_install()
    perms = {
        name: {f"{p.content_type.app_label}.{p.codename}" for p in Group.objects.get(name=name).permissions.all()}
        for name in ("viewer", "operator", "admin")
    }
    assert {"crawl.view_project", "crawl.view_page", "console.view_job", "scrape.view_item"} <= perms["viewer"]
    assert not {"console.run_project", "crawl.change_project", NETWORK} & perms["viewer"]
    operator_extra = {"console.run_project", "console.export_results", "console.try_url", "crawl.add_seed"}
    operator_extra.add("console.change_monitor")  # operators tune the monitors' thresholds
    operator_extra |= {"console.add_monitor", "console.delete_monitor"}  # and make rules of their own
    assert perms["operator"] == perms["viewer"] | operator_extra
    assert {NETWORK, "crawl.change_project", "crawl.delete_project", "sinks.add_sink"} <= perms["admin"]
    assert "console.view_all_projects" not in perms["admin"], "seeing every team's projects is given on purpose"


def test_every_api_action_declares_the_permission_it_needs():
    for _prefix, viewset, _basename in router.registry:
        actions = {"list", "retrieve", *(a.__name__ for a in viewset.get_extra_actions())}
        actions |= {"create", "update", "partial_update", "destroy"} & set(dir(viewset))
        assert actions <= set(viewset.action_permissions), viewset


# --- Per-project access through the API ------------------------------------------------------------


MODELS = {
    "seeds": Seed,
    "pages": Page,
    "failures": Page,
    "items": Item,
    "assets": MediaAsset,
    "jobs": Job,
    "sinks": Sink,
}


@pytest.mark.parametrize("resource", list(MODELS))
def test_a_member_lists_only_the_rows_of_their_teams_projects(teams, member, resource):
    client = api(member("admin"))
    listed = client.get(f"/api/{resource}/").json()["results"]
    assert listed and {row["project"] for row in listed} == {"a"}
    assert client.get(f"/api/{resource}/", {"project": "b"}).status_code == 400, "another team's slug is unknown"
    row = MODELS[resource].objects.filter(project=teams[1]).first()
    assert client.get(f"/api/{resource}/{row.id}/").status_code == 404


def test_a_member_does_not_see_or_change_another_teams_project(teams, member):
    b = teams[1]
    client = api(member("admin"))
    assert ids(client.get("/api/projects/")) == ["a"]
    seed = f"/api/seeds/{b.seeds.get().id}/"
    for method, path in [
        *(("get", p) for p in ("/api/projects/b/", "/api/projects/b/export/", "/api/projects/b/progress/", seed)),
        *(("post", f"/api/projects/b/{action}/") for action in ("start", "pause", "resume", "recrawl", "retry-failed")),
        ("post", f"/api/jobs/{b.job_id}/cancel/"),
        *((method, p) for method in ("patch", "delete") for p in ("/api/projects/b/", seed)),
    ]:
        assert getattr(client, method)(path, {"name": "taken"}, format="json").status_code == 404, path
    assert client.post("/api/seeds/", {"project": "b", "url": "http://b.test/x"}, format="json").status_code == 400
    failed = Page.objects.get(project=b).id
    assert client.post("/api/pages/retry/", {"ids": [failed]}, format="json").json() == {"requeued": 0}
    b.refresh_from_db()
    assert (b.name, b.status, Job.objects.get(id=b.job_id).state) == ("b", "active", "queued")
    assert Seed.objects.filter(project=b).count() == 1 and Page.objects.get(id=failed).state == "failed"


def test_the_changes_feed_serves_only_the_users_projects(teams, member, client):
    client.force_login(member("viewer"))
    titles = [c["title"] for c in client.get("/api/changes/").json()["changes"]]
    assert titles == ["a version"]
    assert client.get("/api/changes/", {"project": "b"}).json()["changes"] == []
    client.force_login(member(None))
    assert client.get("/api/changes/").status_code == 403, "no role: no reading"


def test_a_user_who_may_see_all_projects_sees_both_teams(teams, member):
    user = member("viewer", team=None)
    assert ids(api(user).get("/api/projects/")) == []
    user.user_permissions.add(Permission.objects.get(codename="view_all_projects"))
    assert sorted(ids(api(user).get("/api/projects/"))) == ["a", "b"]


def test_a_project_made_through_the_api_belongs_to_its_creator(teams, member):
    creator, other = member("admin"), member("admin", team="team-b")
    assert api(creator).post("/api/projects/", {"name": "new"}, format="json").status_code == 201
    assert ProjectAccess.objects.filter(project__slug="new", user=creator).exists()
    assert "new" in ids(api(creator).get("/api/projects/")) and "new" not in ids(api(other).get("/api/projects/"))
    assert api(member("operator")).post("/api/projects/", {"name": "x"}, format="json").status_code == 403


# --- Roles through the API -------------------------------------------------------------------------


def test_a_viewer_reads_but_cannot_steer_or_export(teams, member):
    client = api(member("viewer"))
    assert client.get("/api/projects/a/progress/").status_code == 200
    for path in ("/api/projects/a/pause/", "/api/projects/a/start/", f"/api/jobs/{teams[0].job_id}/cancel/"):
        assert client.post(path).status_code == 403, path
    assert client.get("/api/projects/a/export/").status_code == 403
    assert client.post("/api/seeds/", {"project": "a", "url": "http://a.test/new"}, format="json").status_code == 403
    assert Project.objects.get(slug="a").status == "active"


def test_an_operator_steers_their_project_and_adds_seeds_but_cannot_set_network_settings(teams, member):
    client = api(member("operator"))
    assert client.post("/api/projects/a/pause/").json()["status"] == "paused"
    assert client.post("/api/projects/a/start/").json()["status"] == "active"
    assert client.get("/api/projects/a/export/").status_code == 200
    added = client.post("/api/seeds/", {"project": "a", "url": "http://a.test/new"}, format="json")
    assert added.status_code == 201, added.content
    private = client.post("/api/seeds/", {"project": "a", "url": "http://127.0.0.1/"}, format="json")
    assert private.status_code == 400 and "blocked_address" in private.json()["url"][0]
    assert client.patch("/api/projects/a/", {"allow_private": True}, format="json").status_code == 403
    assert Project.objects.get(slug="a").allow_private is False


@pytest.mark.parametrize(
    ("field", "value"),
    [("allow_private", True), ("proxy", "http://evil.test:1"), ("spider", "poison"),
     ("cookies", {"session": "mine"}), ("request_headers", {"Host": "internal"})],
)  # fmt: skip
def test_network_settings_need_their_own_permission_even_on_an_own_project(teams, member, field, value):
    editor = member(None)
    editor.user_permissions.add(*Permission.objects.filter(codename__in=["view_project", "change_project"]))
    refused = api(editor).patch("/api/projects/a/", {field: value}, format="json")
    assert refused.status_code == 403
    assert NETWORK in refused.json()["detail"] and field in refused.json()["detail"]
    assert api(editor).patch("/api/projects/a/", {"max_depth": 4}, format="json").status_code == 200
    creator = member(None)
    creator.user_permissions.add(Permission.objects.get(codename="add_project"))
    assert api(creator).post("/api/projects/", {"name": "n", field: value}, format="json").status_code == 403
    assert not Project.objects.filter(name="n").exists()
    allowed = api(member("admin")).patch("/api/projects/a/", {field: value}, format="json")
    assert allowed.status_code == 200
    assert getattr(Project.objects.get(slug="a"), field) == value


def test_the_allowed_domains_of_a_project_holding_secrets_are_a_network_setting(teams, member, client):
    """Its cookies and headers go to its allowed domains: widening them would send the secrets on."""
    a, _ = teams
    editor = member(None, is_staff=True)
    editor.user_permissions.add(*Permission.objects.filter(codename__in=["view_project", "change_project"]))
    refused = api(editor).patch("/api/projects/a/", {"allowed_domains": "evil.test"}, format="json")
    assert refused.status_code == 403 and "allowed_domains" in refused.json()["detail"]
    plain = Project.objects.create(name="plain", slug="plain")
    ProjectAccess.objects.create(project=plain, group=Group.objects.get(name="team-a"))
    assert api(editor).patch("/api/projects/plain/", {"allowed_domains": "b.test"}, format="json").status_code == 200
    client.force_login(editor)
    assert 'name="allowed_domains"' not in client.get(f"/admin/crawl/project/{a.id}/change/").content.decode()
    assert 'name="allowed_domains"' in client.get(f"/admin/crawl/project/{plain.id}/change/").content.decode()
    assert Project.objects.get(id=a.id).allowed_domains == ""


def test_a_redis_or_python_sink_needs_the_network_permission(teams, member):
    editor = member(None)
    editor.user_permissions.add(*Permission.objects.filter(codename__in=["view_sink", "add_sink"]))
    body = {"project": "a", "name": "r2", "kind": "redis", "config": {"url": "redis://10.0.0.1:6379/0"}}
    assert api(editor).post("/api/sinks/", body, format="json").status_code == 403
    assert api(member("admin")).post("/api/sinks/", body, format="json").status_code == 201


SECRET_READS = ["/api/projects/", "/api/projects/a/", "/api/seeds/", "/api/sinks/", "/api/jobs/", "/api/schema/"]


@pytest.mark.parametrize("role", ["viewer", "operator", "admin"])
def test_the_api_never_returns_stored_secrets(teams, member, role):
    client = api(member(role))
    seed = Seed.objects.get(project__slug="a")
    answers = [client.get(path) for path in [*SECRET_READS, f"/api/seeds/{seed.id}/"]]
    answers += [client.post("/api/projects/a/pause/"), client.patch("/api/projects/a/", {"max_depth": 2})]
    for answer in answers:
        assert answer.status_code in (200, 403)
        assert not [s for s in SECRETS if s in answer.content.decode()], answer.request["PATH_INFO"]
    project = client.get("/api/projects/a/").json()
    assert (project["cookies"], project["request_headers"]) == ({"session": "***"}, {"Authorization": "***"})
    assert project["proxy"] == "http://crawler:***@proxy.test:3128"
    assert client.get("/api/sinks/").json()["results"][0]["config"]["url"] == "redis://:***@r.test/0"
    assert client.get(f"/api/seeds/{seed.id}/").json()["headers"] == {"X-Token": "***"}


def test_secrets_sent_back_masked_keep_their_stored_values(teams, member):
    client = api(member("admin"))
    project = client.get("/api/projects/a/").json()
    put_back = {k: v for k, v in project.items() if k not in ("id", "status", "created_at", "rules_changed_at")}
    assert client.put("/api/projects/a/", put_back, format="json").status_code == 200
    sink = client.get("/api/sinks/").json()["results"][0]
    assert client.patch(f"/api/sinks/{sink['id']}/", {"config": sink["config"]}, format="json").status_code == 200
    stored = Project.objects.get(slug="a")
    assert (stored.cookies["session"], stored.request_headers["Authorization"]) == (COOKIE, HEADER)
    assert PASSWORD in stored.proxy and PASSWORD in Sink.objects.get(id=sink["id"]).config["url"]
    editor = member(None)  # may change projects, not network settings: sending the masks back changes nothing
    editor.user_permissions.add(*Permission.objects.filter(codename__in=["view_project", "change_project"]))
    same = {"cookies": project["cookies"], "proxy": project["proxy"], "allow_private": False}
    assert api(editor).patch("/api/projects/a/", same, format="json").status_code == 200


# --- The admin and the dashboard -------------------------------------------------------------------


def test_view_only_staff_sees_the_admin_but_no_actions(teams, member, client):
    a, b = teams
    client.force_login(member("viewer", is_staff=True))
    projects = client.get("/admin/crawl/project/")
    assert projects.status_code == 200 and projects.context["action_form"] is None
    assert [p.slug for p in projects.context["cl"].result_list] == ["a"]
    assert client.get(f"/admin/crawl/project/{b.id}/change/").status_code == 302, "another team's: no such project"
    page = client.get(f"/admin/crawl/project/{a.id}/change/").content.decode()
    assert "***" in page and not [s for s in SECRETS if s in page]
    client.post("/admin/crawl/project/", {"action": "pause", "_selected_action": [a.id]})
    assert Project.objects.get(id=a.id).status == "active"
    assert client.post(f"/admin/console/job/{a.job_id}/do/pause/").status_code == 403
    assert client.post("/admin/dashboard/control/", {"project": a.id, "action": "pause"}).status_code == 403
    assert client.get(f"/admin/crawl/project/{a.id}/export/").status_code == 403
    assert client.get("/admin/tryurl/").status_code == 403
    overview = client.get("/admin/dashboard/overview/").json()["projects"]
    assert [(p["slug"], p["actions"]) for p in overview] == [("a", [])]
    for path in ("/admin/crawl/page/", "/admin/console/job/", "/admin/scrape/item/", "/admin/media/mediaasset/"):
        listed = client.get(path).context["cl"].result_list
        assert listed and {row.project_id for row in listed} == {a.id}, path


def test_a_viewer_reads_a_pages_request_with_its_headers_cookies_and_body_masked(teams, member, client):
    """A seed's (or a spider's) own request is kept on its frontier row: shown masked like the seed."""
    a, _ = teams
    body = "user=me&password=body-s3cret"
    request = {"method": "POST", "body": body, "headers": {"X-Token": SEED_HEADER}, "cookies": {"sid": COOKIE}}
    page = Page.objects.filter(project=a).first()
    Page.objects.filter(id=page.id).update(request=request)
    client.force_login(member("viewer", is_staff=True))
    for view in ("page", "failedpage"):
        shown = client.get(f"/admin/crawl/{view}/{page.id}/change/")
        html = shown.content.decode()
        assert shown.status_code == 200 and "X-Token" in html and "POST" in html, view
        assert not [s for s in (*SECRETS, "body-s3cret") if s in html], view
    Seed.objects.filter(project=a).update(body=body, method="POST")
    html = client.get(f"/admin/crawl/project/{a.id}/change/").content.decode()
    assert "POST" in html and "body-s3cret" not in html


def test_the_overviews_warnings_count_only_the_work_of_the_users_projects(teams, member, client):
    _, b = teams
    urls = [f"http://b.test/q{n}" for n in range(7)]
    Page.objects.bulk_create([Page(project=b, url=u, url_key=url_key(u), host="b.test", state="queued") for u in urls])
    client.force_login(member("viewer", is_staff=True))
    warnings = " ".join(client.get("/admin/dashboard/overview/").json()["warnings"])
    assert "7 rows" not in warnings and "fetch stage" not in warnings, warnings
    client.force_login(member("viewer", team="team-b", is_staff=True))
    assert "7 rows owe the fetch stage" in " ".join(client.get("/admin/dashboard/overview/").json()["warnings"])


def test_an_operator_steers_from_the_admin_and_the_dashboard_but_edits_nothing(teams, member, client):
    a, b = teams
    client.force_login(member("operator", is_staff=True))
    client.post("/admin/crawl/project/", {"action": "pause", "_selected_action": [a.id]})
    assert Project.objects.get(id=a.id).status == "paused"
    assert client.post("/admin/dashboard/control/", {"project": a.id, "action": "start"}).json()["ok"]
    assert client.post("/admin/dashboard/control/", {"project": b.id, "action": "pause"}).status_code == 400
    assert client.post(f"/admin/crawl/project/{a.id}/change/", {"allow_private": "on"}).status_code == 403
    assert Project.objects.get(id=a.id).allow_private is False


def change_form_data(response) -> dict:
    """The change form (with its inlines) as a browser posts it back untouched."""
    forms = [response.context["adminform"].form]
    data = {}
    for formset in (f.formset for f in response.context["inline_admin_formsets"]):
        data.update({f"{formset.prefix}-{k}": v for k, v in formset.management_form.initial.items()})
        forms += formset.forms[: formset.initial_form_count()]
        data[f"{formset.prefix}-TOTAL_FORMS"] = formset.initial_form_count()
    for form in forms:
        for bound in form:
            value = bound.value()
            if value is not None and value is not False and value != "":
                data[bound.html_name] = "on" if value is True else value
    return data


def test_the_admin_masks_secrets_and_keeps_them_when_sent_back(teams, member, client):
    a = teams[0]
    client.force_login(member("admin", is_staff=True))
    form = client.get(f"/admin/crawl/project/{a.id}/change/")
    assert not [s for s in SECRETS if s in form.content.decode()]
    data = change_form_data(form) | {"max_depth": "7"}
    saved = client.post(f"/admin/crawl/project/{a.id}/change/", data)
    assert saved.status_code == 302, saved.context and saved.context["errors"]
    stored = Project.objects.get(id=a.id)
    assert (stored.max_depth, stored.cookies, stored.proxy) == (7, {"session": COOKIE}, a.proxy)
    assert a.seeds.get().headers == {"X-Token": SEED_HEADER}
    assert PASSWORD in Sink.objects.get(project=a).config["url"]
    client.post(f"/admin/crawl/project/{a.id}/change/", data | {"proxy": "http://other.test:1"})
    assert Project.objects.get(id=a.id).proxy == "http://other.test:1", "a user with the permission replaces it"


def test_without_the_network_permission_the_admin_shows_network_settings_read_only(teams, member, client):
    a = teams[0]
    editor = member(None, is_staff=True)
    editor.user_permissions.add(*Permission.objects.filter(codename__in=["view_project", "change_project"]))
    client.force_login(editor)
    form = client.get(f"/admin/crawl/project/{a.id}/change/")
    fields = set(form.context["adminform"].form.fields)
    assert "max_depth" in fields and not {"allow_private", "proxy", "spider", "cookies", "request_headers"} & fields
    data = change_form_data(form) | {"allow_private": "on", "proxy": "http://evil.test:1", "max_depth": "3"}
    assert client.post(f"/admin/crawl/project/{a.id}/change/", data).status_code == 302
    stored = Project.objects.get(id=a.id)
    assert (stored.max_depth, stored.allow_private, stored.proxy) == (3, False, a.proxy)


def test_without_the_network_permission_the_admin_adds_no_seed_off_a_secret_holding_projects_sites(
    teams, member, client
):
    a, _ = teams
    editor = member(None, is_staff=True)
    codenames = ["view_project", "change_project", "view_seed", "add_seed", "change_seed"]
    editor.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client.force_login(editor)
    page = f"/admin/crawl/project/{a.id}/change/"
    data = change_form_data(client.get(page))
    pasted = client.post(page, data | {"bulk_seeds": "http://evil.test/collect"})
    assert pasted.status_code == 200 and "change_network_settings" in pasted.content.decode()
    inline = client.post(page, data | {"seeds-0-url": "http://evil.test/collect"})
    assert inline.status_code == 200 and "change_network_settings" in inline.content.decode()
    assert client.post(page, data | {"bulk_seeds": "http://a.test/more"}).status_code == 302
    assert sorted(Seed.objects.filter(project=a).values_list("url", flat=True)) == [
        "http://a.test/",
        "http://a.test/more",
    ]


def test_a_project_made_in_the_admin_belongs_to_its_creator(member, client, db):
    creator = member("admin", is_staff=True)
    client.force_login(creator)
    form = client.get("/admin/crawl/project/add/")
    data = change_form_data(form) | {"name": "made", "slug": "made"}
    made = client.post("/admin/crawl/project/add/", data)
    assert made.status_code == 302, made.context and made.context["adminform"].form.errors
    assert ProjectAccess.objects.filter(project__slug="made", user=creator).exists()


# --- Try a URL ---------------------------------------------------------------------------------------


@pytest.fixture
def loopback():
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    site.files["/inside"] = (200, HTML, b"<html><head><title>Internal</title></head></html>")
    with SiteServer(site) as server:
        yield server


def test_try_a_url_on_private_addresses_needs_the_network_permission(teams, member, client, loopback):
    a = teams[0]
    client.force_login(member("operator", is_staff=True))
    refused = client.post("/admin/tryurl/", {"url": f"{loopback.url}/inside", "allow_private": "on"})
    assert refused.status_code == 403 and "change_network_settings" in refused.content.decode()
    Project.objects.filter(id=a.id).update(allow_private=True, proxy="")
    through_project = client.post("/admin/tryurl/", {"url": f"{loopback.url}/inside", "project": a.id})
    assert through_project.status_code == 403
    guarded = client.post("/admin/tryurl/", {"url": f"{loopback.url}/inside"})
    assert guarded.status_code == 200 and "blocked_address" in guarded.content.decode()
    assert loopback.paths() == [], "nothing reached the internal address"
    client.force_login(member("admin", is_staff=True))
    allowed = client.post("/admin/tryurl/", {"url": f"{loopback.url}/inside", "allow_private": "on"})
    assert allowed.status_code == 200 and "Internal" in allowed.content.decode()


def test_another_teams_project_names_and_slugs_cannot_be_probed(teams, member, client):
    """A name or slug another team holds is answered as a made-up one would be: created, its slug
    the first free one; only the member's own team's projects are named in a refusal."""
    creator = api(member("admin"))
    for name, made_up in (("B!", "Nobody one"), ("b", "nobody two")):
        taken, free = (creator.post("/api/projects/", {"name": n}, format="json") for n in (name, made_up))
        assert taken.status_code == free.status_code == 201, (taken.content, free.content)
        assert set(taken.json()) == set(free.json())
    slug = creator.post("/api/projects/", {"name": "Mine", "slug": "b"}, format="json")
    assert slug.status_code == 201 and slug.json()["slug"].startswith("b-"), slug.content
    assert Project.objects.get(slug="b").name == "b", "the other team's project is untouched"
    alike = creator.post("/api/projects/", {"name": "A!"}, format="json")
    assert alike.status_code == 400 and "(slug a)" in alike.json()["name"][0], "its own team's project is named"
    own_slug = creator.post("/api/projects/", {"name": "Mine too", "slug": "a"}, format="json")
    assert own_slug.status_code == 400 and "slug" in own_slug.json()

    client.force_login(member("admin", is_staff=True))
    form = add_form_data(client.get("/admin/crawl/project/add/")) | {"name": "b", "slug": "b"}
    added = client.post("/admin/crawl/project/add/", form)
    assert added.status_code == 302, [str(e) for e in added.context["adminform"].form.errors.values()]
    assert Project.objects.filter(name="b").count() == 3


def test_the_api_shows_a_seeds_post_body_only_to_those_who_may_change_its_project(teams, member):
    a, _ = teams
    seed = Seed.objects.create(project=a, url="http://a.test/login", method="POST", body="user=u&password=hunter2")
    viewer = api(member("viewer")).get(f"/api/seeds/{seed.id}/")
    assert viewer.status_code == 200, viewer.content
    assert viewer.json()["body"] == "***"
    owner = api(member("admin")).get(f"/api/seeds/{seed.id}/")
    assert owner.json()["body"] == "user=u&password=hunter2"


def test_the_owner_forms_offer_only_the_users_and_groups_a_team_member_sees(teams, member, client):
    a, _ = teams
    admin_member, teammate, stranger = member("admin", is_staff=True), member("viewer"), member("viewer", "team-b")
    client.force_login(admin_member)
    for path in ("/admin/console/projectaccess/add/", f"/admin/crawl/project/{a.id}/change/"):
        html = client.get(path).content.decode()
        options = set(re.findall(r'<option value="\d+"[^>]*>([^<]+)</option>', html))
        assert {"team-a", admin_member.username, teammate.username} <= options, (path, options)
        assert not {"team-b", stranger.username, "admin", "viewer"} & options, (path, options)
    team_b = Group.objects.get(name="team-b")
    posted = client.post("/admin/console/projectaccess/add/", {"project": a.id, "group": team_b.id})
    assert posted.status_code == 200 and not ProjectAccess.objects.filter(project=a, group=team_b).exists()
