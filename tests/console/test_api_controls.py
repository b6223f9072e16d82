"""The API offers the admin's other controls with the admin's permissions: rule sets, hosts (block,
unblock, delay), re-extract, asset retry and Try a URL, all in the OpenAPI schema."""

import pytest
from django.contrib.auth.models import Permission

from console.models import Job
from console.runs.steering import job_cancel
from crawl.models import Host, MediaAsset, Page, Project
from scrape.models import RuleSet
from tests.console.test_admin_console import add_page
from tests.console.test_permissions import HTML, api, member, teams  # noqa: F401 - fixtures (F811 below)
from tests.servers import Site, SiteServer

pytestmark = pytest.mark.django_db

RULES = {"item_selector": "div.product", "fields": {"title": {"css": "h2"}}}


def test_rule_sets_are_managed_through_the_api_with_the_admins_checks(teams, member):  # noqa: F811
    admin = api(member("admin"))
    made = admin.post("/api/rulesets/", {"project": "a", "name": "products", "spec": RULES}, format="json")
    assert made.status_code == 201, made.content
    rule_set = RuleSet.objects.get(id=made.json()["id"])
    assert (rule_set.project.slug, made.json()["version"]) == ("a", rule_set.version)
    assert Project.objects.get(slug="a").rules_changed_at is not None, "workers see the change"
    bad = admin.patch(f"/api/rulesets/{rule_set.id}/", {"spec": {"fields": {"title": {"css": "div["}}}}, format="json")
    assert bad.status_code == 400 and "invalid CSS selector 'div['" in bad.json()["spec"][0]
    twin = admin.post("/api/rulesets/", {"project": "a", "name": "products", "spec": RULES}, format="json")
    assert twin.status_code == 400 and "name" in twin.json()
    assert admin.post("/api/rulesets/", {"project": "b", "name": "x", "spec": RULES}, format="json").status_code == 400
    assert [r["name"] for r in admin.get("/api/rulesets/", {"project": "a"}).json()["results"]] == ["products"]
    off = admin.patch(f"/api/rulesets/{rule_set.id}/", {"enabled": False}, format="json")
    assert off.status_code == 200 and RuleSet.objects.get(id=rule_set.id).enabled is False
    viewer = api(member("viewer"))
    assert viewer.get(f"/api/rulesets/{rule_set.id}/").status_code == 200
    assert viewer.delete(f"/api/rulesets/{rule_set.id}/").status_code == 403
    assert admin.delete(f"/api/rulesets/{rule_set.id}/").status_code == 204


def test_hosts_are_blocked_unblocked_and_slowed_by_users_who_see_every_project(teams, member):  # noqa: F811
    failed = add_page(teams[0], "http://shop.test/x", "failed", error_code="host_blocked")
    team_admin = api(member("admin"))
    assert team_admin.post("/api/hosts/", {"host": "shop.test"}, format="json").status_code == 403
    everyone = member("admin", team=None)
    everyone.user_permissions.add(Permission.objects.get(codename="view_all_projects"))
    client = api(everyone)
    assert client.post("/api/hosts/", {"host": "Shop.test", "min_delay": 2}, format="json").status_code == 201
    blocked = client.post("/api/hosts/shop.test/block/", {"reason": "asked us to stop"}, format="json")
    assert blocked.status_code == 200 and blocked.json()["blocked"] is True
    assert Host.objects.get(host="shop.test").blocked_reason == "asked us to stop"
    assert [h["host"] for h in client.get("/api/hosts/", {"blocked": "true"}).json()["results"]] == ["shop.test"]
    slowed = client.patch("/api/hosts/shop.test/", {"min_delay": 5, "max_in_flight": 1}, format="json")
    assert (slowed.json()["min_delay"], slowed.json()["max_in_flight"]) == (5.0, 1)
    assert client.patch("/api/hosts/shop.test/", {"blocked": False}, format="json").json()["blocked"] is True
    unblocked = client.post("/api/hosts/shop.test/unblock/")
    assert unblocked.json()["blocked"] is False and unblocked.json()["published"] == 1
    assert Page.objects.get(id=failed.id).state == "queued", "its host_blocked failure is retried"
    viewer = member("viewer", team=None)
    viewer.user_permissions.add(Permission.objects.get(codename="view_all_projects"))
    assert api(viewer).get("/api/hosts/shop.test/").status_code == 200
    assert api(viewer).post("/api/hosts/shop.test/block/").status_code == 403


def test_reextract_and_asset_retry_are_operator_actions(teams, member):  # noqa: F811
    operator, viewer = api(member("operator")), api(member("viewer"))
    assert viewer.post("/api/projects/a/reextract/").status_code == 403
    job_cancel(job=Job.objects.get(id=teams[0].job_id))
    answer = operator.post("/api/projects/a/reextract/")
    assert answer.status_code == 200, answer.content
    assert (answer.json()["status"], Job.objects.get(id=answer.json()["job"]).kind) == ("active", "reextract")
    mine, theirs = (MediaAsset.objects.get(project=p) for p in teams)
    MediaAsset.objects.update(state="failed", error_code="http_500")
    assert viewer.post("/api/assets/retry/", {"ids": [mine.id]}, format="json").status_code == 403
    retried = operator.post("/api/assets/retry/", {"ids": [mine.id, theirs.id]}, format="json")
    assert retried.json() == {"requeued": 1}
    assert (MediaAsset.objects.get(id=mine.id).state, MediaAsset.objects.get(id=theirs.id).state) == (
        "queued",
        "failed",
    ), "another team's asset is left alone"


def test_pages_are_fetched_again_on_request_like_the_admins_action(teams, member):  # noqa: F811
    done = add_page(teams[0], "http://a.test/done", "done")
    theirs = add_page(teams[1], "http://b.test/done", "done")
    assert api(member("viewer")).post("/api/pages/requeue/", {"ids": [done.id]}, format="json").status_code == 403
    answer = api(member("operator")).post("/api/pages/requeue/", {"ids": [done.id, theirs.id]}, format="json")
    assert answer.json() == {"requeued": 1}
    assert (Page.objects.get(id=done.id).state, Page.objects.get(id=theirs.id).state) == ("queued", "done")


def test_try_a_url_answers_the_admins_report_with_its_permissions(teams, member):  # noqa: F811
    site = Site(files={"/p": (200, HTML, b"<title>Kettle</title><div class=product><h2>Kettle</h2></div>")})
    operator = api(member("operator"))
    with SiteServer(site) as server:
        url = f"{server.url}/p"
        refused = operator.post("/api/try/", {"url": url, "allow_private": True}, format="json")
        assert refused.status_code == 403 and "change_network_settings" in refused.json()["detail"]
        assert api(member("viewer")).post("/api/try/", {"url": url}, format="json").status_code == 403
        report = api(member("admin")).post(
            "/api/try/", {"url": url, "allow_private": True, "selector": "h2"}, format="json"
        )
    assert report.status_code == 200, report.content
    body = report.json()
    assert (body["status"], body["page"]["title"]) == (200, "Kettle")
    assert (body["selector"]["count"], body["selector"]["matches"]) == (1, ["Kettle"])
    assert not Page.objects.filter(url=url).exists(), "nothing is stored"


def test_the_openapi_schema_describes_the_controls(admin_client):
    paths = admin_client.get("/api/schema/", {"format": "json"}).json()["paths"]
    for path in (
        "/api/rulesets/",
        "/api/rulesets/{id}/",
        "/api/hosts/",
        "/api/hosts/{host}/block/",
        "/api/hosts/{host}/unblock/",
        "/api/projects/{slug}/reextract/",
        "/api/assets/retry/",
        "/api/pages/requeue/",
        "/api/try/",
    ):
        assert path in paths, path
    assert "post" in paths["/api/try/"] and "patch" in paths["/api/hosts/{host}/"]
