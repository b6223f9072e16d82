"""GET /metrics (console/metrics.py): numbers read from the rows, never public, right during a real crawl."""

import subprocess
import sys
from datetime import timedelta

import httpx
import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db.models import Sum
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from console.metrics import OTHER_HOSTS, TOP_HOSTS
from console.models import ProjectAccess
from crawl.models import MediaAsset, Page, Project
from tests.conftest import BASE_DIR, generated_site, last_json_line
from tests.helpers import wait_until
from tests.servers import SiteServer

TOKEN = "metrics-test-token"


def samples(text: str) -> dict[tuple, float]:
    """{(sample name, ((label, value), ...)): value} from the exposition text, via the real parser."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def page(project: Project, n: int, **fields) -> Page:
    host = fields.pop("host", "a.example")
    url = f"http://{host}/p{n}"
    return Page(project=project, url=url, url_key=f"{project.id}-{n:060d}", host=host, **fields)


@pytest.fixture
def rows(db):
    """Project alpha: 3 done, 1 failed (http_404), 1 queued, 1 fetched; beta: 1 failed robots refusal."""
    now = timezone.now()
    alpha = Project.objects.create(name="alpha", slug="alpha")
    beta = Project.objects.create(name="beta", slug="beta")
    done = {"state": "done", "fetched_at": now, "fetch_count": 1}
    Page.objects.bulk_create(
        [
            page(alpha, 1, **done, fetch_ms=40, content_length=100),
            page(alpha, 2, **done, fetch_ms=300, content_length=200),
            page(alpha, 3, **(done | {"fetch_count": 2}), fetch_ms=2000, content_length=300, host="b.example"),
            page(alpha, 4, state="failed", error_code="http_404", fetched_at=now, fetch_ms=10, fetch_count=1),
            page(alpha, 5, state="queued"),
            page(alpha, 6, state="fetched", fetched_at=now, fetch_ms=100, fetch_count=1, content_length=50),
            page(beta, 1, state="failed", error_code="robots_disallowed"),
        ]
    )
    # Extracted 4 s (two pages) and 40 s after their fetch; auto_now does not apply to update().
    Page.objects.filter(project=alpha, url__endswith="/p1").update(updated_at=now + timedelta(seconds=4))
    Page.objects.filter(project=alpha, url__endswith="/p2").update(updated_at=now + timedelta(seconds=4))
    Page.objects.filter(project=alpha, url__endswith="/p3").update(updated_at=now + timedelta(seconds=40))
    MediaAsset.objects.create(project=alpha, url="http://a.example/i.jpg", url_key="i", state="done", size=1234)
    MediaAsset.objects.create(project=alpha, url="http://a.example/v.mp4", url_key="v", state="queued")
    MediaAsset.objects.filter(url_key="i").update(created_at=now - timedelta(seconds=3), downloaded_at=now)
    return alpha


@pytest.fixture
def staff_client(client):
    """A staff user who sees every project (an operator of the whole crawler)."""
    user = User.objects.create_user("ops", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_all_projects"))
    client.force_login(user)
    return client


def test_it_counts_pages_bytes_and_failures_from_the_rows(rows, staff_client):
    got = samples(staff_client.get("/metrics").content.decode())
    assert got[("crawlhub_pages", (("project", "alpha"), ("state", "done")))] == 3
    assert got[("crawlhub_pages", (("project", "alpha"), ("state", "queued")))] == 1
    assert got[("crawlhub_pages_fetched", (("project", "alpha"),))] == 5
    assert got[("crawlhub_pages_fetched", (("project", "beta"),))] == 0
    assert got[("crawlhub_fetches_total", (("project", "alpha"),))] == 6
    assert got[("crawlhub_pages_fetched_bytes", (("project", "alpha"),))] == 650
    assert got[("crawlhub_pages_failed", (("error_code", "http_404"), ("project", "alpha")))] == 1
    assert got[("crawlhub_pages_failed", (("error_code", "robots_disallowed"), ("project", "beta")))] == 1
    assert got[("crawlhub_host_pages_fetched", (("host", "a.example"), ("project", "alpha")))] == 4
    assert got[("crawlhub_host_pages_failed", (("host", "a.example"), ("project", "alpha")))] == 1
    assert got[("crawlhub_host_pages_fetched", (("host", "b.example"), ("project", "alpha")))] == 1
    assert got[("crawlhub_assets", (("project", "alpha"), ("state", "done")))] == 1
    assert got[("crawlhub_assets_bytes", (("project", "alpha"),))] == 1234


def test_it_reports_stage_latencies_of_the_last_hour(rows, staff_client):
    got = samples(staff_client.get("/metrics").content.decode())
    alpha = ("project", "alpha")

    def bucket(name: str, le: str) -> float:
        return got[(f"{name}_bucket", (("le", le), alpha))]

    # fetch_ms 10, 40, 100, 300, 2000
    assert [bucket("crawlhub_fetch_seconds", le) for le in ("0.05", "0.1", "0.25", "0.5", "2.5", "+Inf")] == [
        2,
        3,
        3,
        4,
        5,
        5,
    ]
    assert got[("crawlhub_fetch_seconds_gsum", (alpha,))] == pytest.approx(2.45)
    assert [bucket("crawlhub_extract_delay_seconds", le) for le in ("1.0", "5.0", "30.0", "60.0")] == [0, 2, 2, 3]
    assert got[("crawlhub_extract_delay_seconds_gsum", (alpha,))] == pytest.approx(48)
    assert [bucket("crawlhub_download_delay_seconds", le) for le in ("2.5", "5.0")] == [0, 1]


def test_it_reports_work_owed_per_stage_and_the_broker_queues(rows, staff_client, broker):
    got = samples(staff_client.get("/metrics").content.decode())
    assert got[("crawlhub_stage_backlog", (("stage", "fetch"),))] == 1
    assert got[("crawlhub_stage_backlog", (("stage", "extract"),))] == 1
    assert got[("crawlhub_stage_backlog", (("stage", "download"),))] == 1
    assert got[("crawlhub_broker_queue_messages", (("queue", "fetch"),))] == 0


def test_it_keeps_the_busiest_hosts_and_sums_the_rest(db, staff_client):
    project = Project.objects.create(name="many", slug="many")
    now = timezone.now()
    # host h00 has 1 page, h01 2 pages, ...: the two smallest fall under _other.
    count = TOP_HOSTS + 2
    pages = [
        page(project, i * 100 + k, host=f"h{i:02d}.example", state="done", fetched_at=now)
        for i in range(count)
        for k in range(i + 1)
    ]
    Page.objects.bulk_create(pages)
    got = samples(staff_client.get("/metrics").content.decode())
    hosts = {dict(labels)["host"]: v for (name, labels), v in got.items() if name == "crawlhub_host_pages_fetched"}
    assert len(hosts) == TOP_HOSTS + 1
    assert hosts[OTHER_HOSTS] == 1 + 2
    assert hosts[f"h{count - 1:02d}.example"] == count


def test_a_staff_member_reads_only_their_teams_projects_and_no_queues(rows, client, settings, broker):
    member = User.objects.create_user("member", password="x", is_staff=True)
    team = Group.objects.create(name="team-alpha")
    member.groups.add(team)
    ProjectAccess.objects.create(project=rows, group=team)
    client.force_login(member)
    got = samples(client.get("/metrics").content.decode())
    projects = {dict(labels).get("project") for (_, labels) in got}
    assert projects == {"alpha"}, "beta, its hosts and its error codes are another team's"
    assert not [name for name, _ in got if name.startswith(("crawlhub_stage_backlog", "crawlhub_broker_queue"))]
    settings.CRAWLHUB_METRICS_TOKEN = TOKEN
    client.logout()
    everything = samples(client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).content.decode())
    assert {dict(labels).get("project") for (_, labels) in everything} >= {"alpha", "beta"}


def test_it_is_never_public(db, client, settings):
    assert client.get("/metrics").status_code == 401
    client.force_login(User.objects.create_user("viewer", password="x"))
    assert client.get("/metrics").status_code == 403

    settings.CRAWLHUB_METRICS_TOKEN = TOKEN
    client.logout()
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    assert "crawlhub_stage_backlog" in response.content.decode()


@pytest.mark.integration
def test_it_follows_a_distributed_crawl_over_http(live_server, workers, worker_env, settings):
    settings.CRAWLHUB_METRICS_TOKEN = TOKEN
    fetched = ("crawlhub_pages_fetched", (("project", "metrics"),))
    for stage in ("fetch", "extract", "download"):
        workers.start(stage, stage)
    args = ["crawl", "--allow-private", "--json", "--workers", "0", "--project", "metrics", "--timeout", "120"]
    # A closed client ends the live server's keep-alive thread and with it its database connection.
    with (
        httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as scrape,
        SiteServer.generated(generated_site(60), delay=0.05) as server,
    ):
        crawl = subprocess.Popen(
            [sys.executable, "manage.py", *args, f"{server.url}/"],
            cwd=BASE_DIR,
            env=worker_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        mid = wait_for_metric(scrape, fetched, crawl)
        assert crawl.poll() is None, "the crawl ended before the mid-crawl scrape"
        out, err = crawl.communicate(timeout=150)
        assert crawl.returncode == 0, out + err
        final = samples(scrape.get("/metrics").text)

    pages = Page.objects.filter(project__slug="metrics")
    assert final[fetched] == pages.exclude(fetched_at=None).count()
    assert 0 < mid[fetched] <= final[fetched]
    done = final[("crawlhub_pages", (("project", "metrics"), ("state", "done")))]
    assert done == last_json_line(out)["pages_fetched"]
    assert final[("crawlhub_fetches_total", (("project", "metrics"),))] == pages.aggregate(n=Sum("fetch_count"))["n"]
    assert {final[("crawlhub_stage_backlog", (("stage", s),))] for s in ("fetch", "extract", "download")} == {0}


def wait_for_metric(scrape: httpx.Client, key: tuple, crawl: subprocess.Popen, timeout: float = 60) -> dict:
    """Scrape until the sample `key` is above zero; returns that scrape's samples."""

    def fetched() -> dict | None:
        response = scrape.get("/metrics")
        assert response.status_code == 200
        got = samples(response.text)
        if got.get(key, 0) > 0:
            return got
        assert crawl.poll() is None, "the crawl ended before its first fetch was scraped"
        return None

    return wait_until(fetched, timeout=timeout, what="a page fetched")
