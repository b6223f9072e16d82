"""One masking rule, every surface (issue 47): a secret of each kind is planted in a team's project,
then every surface is searched for it as each role that could attack (operator, viewer, an admin-role
member of the team who does not see every project). A surface is an entry of SURFACES; the API's
routes, the admin's models and the export formats are read from the code, and a console command
must be in COMMAND_RUNS or in QUIET_COMMANDS: a new surface joins this test or fails it."""

import gzip
import io
import zlib
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from console.access.roles import roles_install
from console.api.urls import router
from console.debugger import debug_run_execute, debug_run_start
from console.exports.rows import CONTENT_TYPES
from console.health.models import NotificationTarget
from console.health.monitors import monitor_run, monitors_ensure
from console.health.notify import alerts_announce
from console.models import Job, ProjectAccess
from core.net.guard import allow_networks
from crawl.frontier.discovery import seed_request
from crawl.models import Page, PageContent, Project, ProjectProxy, Seed, SessionCookie
from fetch.proxy_pool import proxy_outcome
from scrape.models import Item
from scrape.spider_request import Request
from sinks.delivery import sink_deliver, sinks_offer
from sinks.models import Sink
from tests.servers import Site, SiteServer

pytestmark = pytest.mark.django_db

# Each kind of secret, planted once; none may come back on any surface, to any of the ROLES.
SECRETS = {
    "project cookie": "pcookie-s3cret",
    "project request header": "pheader-s3cret",
    "proxy password": "proxypw-s3cret",
    "per-request proxy password": "reqproxypw-s3cret",
    "proxy pool password": "poolpw-s3cret",
    "seed header": "sheader-s3cret",
    "seed POST body": "sbody-s3cret",
    "session cookie": "session-s3cret",
    "Set-Cookie of a response": "setcookie-s3cret",
    "sink URL password": "sinkpw-s3cret",
    "webhook path": "hookpath-s3cret",
    "webhook query": "hookquery-s3cret",
    "sink signing secret": "signing-s3cret-0123456789abcdef",
    "webhook receiver's reply": "reply-s3cret",
    "notification target password": "notepw-s3cret",
    "notification target path": "notepath-s3cret",
    "notification custom header": "notehdr-s3cret",
    "notification payload extra": "noteextra-s3cret",
    "notification form field": "noteform-s3cret",
    "site-wide notification target": "sitewide-s3cret",
}
ROLES = ("operator", "viewer", "admin")
# The one exception, by design: a seed's POST body is a field of the seed's form, shown (to edit it)
# to whoever may change the project; masked for everyone else, and in exports and logs for all.
SHOWN = {"seed POST body": {"admin": ("api", "admin")}}  # kind -> role -> the surfaces that show it
HTML = {"Content-Type": "text/html; charset=utf-8"}


@pytest.fixture
def world(django_user_model, caplog):
    """The team's project with every secret planted and used: a crawled login page, a refusing
    webhook sink that tried, an alert whose targets refused; the log lines all of it wrote."""
    roles_install()
    caplog.set_level("INFO")
    allow_networks(["127.0.0.0/8"])
    refusing = Site(default=(500, {"Content-Type": "text/plain"}, SECRETS["webhook receiver's reply"].encode()))
    login = (200, {**HTML, "Set-Cookie": f"sid={SECRETS['Set-Cookie of a response']}; Path=/"}, b"<p>in</p>")
    try:
        with (
            SiteServer(Site(files={"/login": login}, default=(200, HTML, b"ok"))) as site,
            SiteServer(refusing) as receiver,
        ):
            project = _planted(site, receiver, login)
            users = _members(django_user_model, project)
            yield {"project": project, "site": site, "users": users, "log": caplog.text}  # the setup's lines
    finally:
        allow_networks(settings.CRAWL_ALLOWED_NETWORKS)


def _planted(site: SiteServer, receiver: SiteServer, login: tuple) -> Project:
    team = Group.objects.create(name="team")
    project = Project.objects.create(
        name="shop", slug="shop", allowed_domains="127.0.0.1", obey_robots=False,
        cookies={"c": SECRETS["project cookie"]}, request_headers={"Authorization": SECRETS["project request header"]},
    )  # fmt: skip
    other = Project.objects.create(name="proxied", slug="proxied", proxy=f"http://u:{SECRETS['proxy password']}@p.test")
    for owned in (project, other):
        ProjectAccess.objects.create(project=owned, group=team)
    seed = Seed.objects.create(
        project=project, url=f"{site.url}/login", method="POST", body=f"password={SECRETS['seed POST body']}",
        headers={"X-Token": SECRETS["seed header"]},
    )  # fmt: skip
    page = Page.objects.create(
        project=project, url=seed.url, url_key="k" * 64, host="127.0.0.1", state="done", status_code=200,
        request=seed_request(seed), fetched_at=timezone.now(),
    )  # fmt: skip
    PageContent.objects.create(page=page, headers=dict(login[1]), body=zlib.compress(login[2]))
    proxied = Request(f"{site.url}/api", route="api", proxy=f"http://u:{SECRETS['per-request proxy password']}@p.test")
    Page.objects.create(
        project=project, url=proxied.url, url_key="p" * 64, host="127.0.0.1", request=proxied.page_request()
    )  # a spider's follow-up request, with its own proxy
    Item.objects.create(project=project, page=page, kind="page", data={"title": "in"})
    SessionCookie.objects.create(
        project=project, domain="127.0.0.1", path="/", name="sid", value=SECRETS["session cookie"]
    )
    pooled = ProjectProxy.objects.create(project=project, url=f"http://u:{SECRETS['proxy pool password']}@p.test:3128")
    proxy_outcome(pooled, "error", 0.1, error=f"{pooled.url} failed")  # an error text that quotes it
    _failing_sink(project, receiver)
    _refused_alert(project, receiver)
    return project


def _failing_sink(project: Project, receiver: SiteServer) -> None:
    host = receiver.url.removeprefix("http://")
    url = f"http://crawler:{SECRETS['sink URL password']}@{host}/{SECRETS['webhook path']}?t={SECRETS['webhook query']}"
    Project.objects.filter(id=project.id).update(allow_private=True)  # the sink's gate reaches loopback
    sink = Sink.objects.create(
        project=project, name="hook", kind="http", config={"url": url, "secret": SECRETS["sink signing secret"]}
    )
    sinks_offer(project.id, [{"key": "k1", "type": "item", "data": {}}])
    assert sink_deliver(sink.id) == 0, "the receiver refused"
    Project.objects.filter(id=project.id).update(allow_private=False)


def _refused_alert(project: Project, receiver: SiteServer) -> None:
    host = receiver.url.removeprefix("http://")
    own = (
        f"json://me:{SECRETS['notification target password']}@{host}/{SECRETS['notification target path']}"
        f"?+Authorization=Bearer%20{SECRETS['notification custom header']}"
        f"&:k={SECRETS['notification payload extra']}&-f={SECRETS['notification form field']}"
    )
    NotificationTarget.objects.create(project=project, name="team hook", url=own)
    NotificationTarget.objects.create(
        project=None, name="everyone", url=f"json://{host}/{SECRETS['site-wide notification target']}"
    )
    monitors_ensure([project.id])
    Job.objects.create(project=project, trigger="admin", state="failed", finished_at=timezone.now())
    monitor = project.monitors.get(kind="job_failed")
    monitor_run(monitor, project, timezone.now())
    assert alerts_announce() == 1


def _members(users, project: Project) -> dict:
    made = {}
    for role in ROLES:
        user = users.objects.create_user(f"{role}-member", password="x", is_staff=True)
        user.groups.add(*Group.objects.filter(name__in=[role, "team"]))
        made[role] = user
    return made


# --- The surfaces -------------------------------------------------------------------------------


def api_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def body(response) -> str:
    if getattr(response, "streaming", False):
        data = b"".join(response.streaming_content)
        return (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode(errors="replace")
    return response.content.decode(errors="replace")


def api(world, user) -> str:
    """Every route of the API's router, listed and each listed row read, and the changes feed."""
    client, seen = api_client(user), []
    for prefix, _, _ in router.registry:
        listed = client.get(f"/api/{prefix}/")
        seen.append(body(listed))
        rows = listed.json().get("results", []) if listed.status_code == 200 else []
        for row in rows[:5]:
            key = row.get("slug") or row.get("id")
            seen.append(body(client.get(f"/api/{prefix}/{key}/")))
    seen.append(body(client.get(f"/api/projects/{world['project'].slug}/progress/")))
    seen.append(body(client.get("/api/changes/")))
    return "\n".join(seen)


def admin_pages(world, user) -> str:
    """Every model's list in the admin, and the change page of each of its first rows; the overview."""
    client, seen = Client(), []
    client.force_login(user)
    for model in admin.site._registry:
        meta = model._meta
        seen.append(body(client.get(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))))
        for pk in model.objects.values_list("pk", flat=True)[:3]:
            seen.append(body(client.get(reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[pk]))))
    seen.append(body(client.get("/admin/dashboard/")))
    return "\n".join(seen)


def exports(world, user) -> str:
    """The export in every format the code serves (JSONL, CSV, WARC) and of every kind of row, from
    the API and the admin."""
    api_, admin_client, slug, seen = api_client(user), Client(), world["project"].slug, []
    admin_client.force_login(user)
    for fmt in [*CONTENT_TYPES, "warc"]:
        for what in ("pages",) if fmt == "warc" else ("pages", "items", "assets"):
            seen.append(body(api_.get(f"/api/projects/{slug}/export/?format={fmt}&what={what}")))
            path = f"/admin/crawl/project/{world['project'].id}/export/?format={fmt}&what={what}"
            seen.append(body(admin_client.get(path)))
    return "\n".join(seen)


def try_a_url(world, user) -> str:
    """Try a URL on the project's login page (its seed: the POST, the cookies), from the API and the
    admin, and the spider debugger's answer on it."""
    url, slug = f"{world['site'].url}/login", world["project"].slug
    answer = api_client(user).post("/api/try/", {"url": url, "project": slug}, format="json")
    client = Client()
    client.force_login(user)
    page = client.post("/admin/tryurl/", {"url": url, "project": world["project"].id})
    run = debug_run_start(project=world["project"], user=user, source="", url=url)
    debug_run_execute(run.id)  # what a worker does: the page only shows its answer
    debugger = client.get(f"/admin/debugger/?run={run.id}")
    proxied = Page.objects.get(url_key="p" * 64)
    replay = debug_run_start(project=world["project"], user=user, source="", url=proxied.url, request=proxied.request)
    debug_run_execute(replay.id)
    replayed = [client.get(f"/admin/debugger/?run={replay.id}"), client.get(f"/admin/debugger/?page={proxied.id}")]
    return "".join(body(r) for r in [answer, page, debugger, *replayed])


def logs(world, user) -> str:
    """What every logger wrote while the secrets were used (the sink's refusal, the alert's), at INFO."""
    return world["log"]


# Console commands: how each is run here, or why its output holds no secret of a project.
COMMAND_RUNS = {
    "sinks": ["shop"],
    "tryurl": ["{site}/login", "--project", "shop", "--json"],
    "export": ["shop", "--what", "pages"],
    "crawlstats": ["shop", "--json"],
    "jobs": ["shop"],
}
QUIET_COMMANDS = {
    "addseeds": "prints the seeds it was given and counts",
    "bench": "runs on its own synthetic site",
    "debugger": "prints a draft spider's items, requests and log lines (no headers, cookies or settings)",
    "deploy": "prints version numbers, hashes, authors and messages (the source is code, shown to every role)",
    "spider": "prints the checks' item differences: items are no secret",
    "crawl": "prints counts and the crawl summary (_crawl_summary: a sink's last error, masked at the source)",
    "pause": "prints a count",
    "resume": "prints a count",
    "recrawl": "prints a count",
    "reextract": "prints a count",
    "requeue": "prints a count",
    "serve": "prints its steps and the admin password it made",
}


def commands(world, user) -> str:
    """The output of every console command that shows a project (run as the system user)."""
    seen = []
    for name, args in COMMAND_RUNS.items():
        out, err = io.StringIO(), io.StringIO()
        call_command(name, *[a.format(site=world["site"].url) for a in args], stdout=out, stderr=err)
        seen.append(out.getvalue() + err.getvalue())
    for fmt in ("csv", "warc"):
        target = Path(settings.VAR_DIR) / f"surface.{fmt}"
        call_command("export", "shop", "--format", fmt, "--output", str(target), stderr=io.StringIO())
        data = target.read_bytes()
        seen.append((gzip.decompress(data) if fmt == "warc" else data).decode(errors="replace"))
    return "\n".join(seen)


SURFACES = {
    "api": api,
    "admin": admin_pages,
    "exports": exports,
    "try a URL": try_a_url,
    "logs": logs,
    "commands": commands,
}


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("role", ROLES)
def test_no_planted_secret_shows_on_any_surface_to_any_role(world, role, surface):
    text = SURFACES[surface](world, world["users"][role])
    assert "***" in text or "403 Forbidden" in text, f"{surface} shows something masked: it was searched"
    shown = [kind for kind, by_role in SHOWN.items() if surface in by_role.get(role, ())]
    leaked = [kind for kind, secret in SECRETS.items() if secret in text and kind not in shown]
    assert leaked == [], f"{surface} shows {role} these secrets: {leaked}"


def test_every_console_command_is_searched_or_said_to_show_no_secret():
    names = {p.stem for p in (Path(settings.BASE_DIR) / "console/management/commands").glob("[a-z]*.py")}
    assert names == set(COMMAND_RUNS) | set(QUIET_COMMANDS), "a new command joins COMMAND_RUNS or QUIET_COMMANDS"


def test_the_surfaces_read_the_api_routes_admin_models_and_export_formats_from_the_code():
    """What the surfaces iterate over is the code's own registry: a new route, model or format joins."""
    assert {"projects", "sinks", "alerts", "pages"} <= {prefix for prefix, _, _ in router.registry}
    assert {"jsonl", "csv"} <= set(CONTENT_TYPES)
    assert {m._meta.model_name for m in admin.site._registry} >= {"project", "sink", "alert", "notificationtarget"}
