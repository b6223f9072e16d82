"""The admin console on the real database: actions change rows, pasted seeds are checked, the big
lists render, the dashboard's JSON counts what the rows say, exports stream."""

import csv
import hashlib
import io
import json
from datetime import timedelta
from html import unescape

import pytest
from django.utils import timezone

from core.storage import store_file
from crawl.models import Host, MediaAsset, Page, Project, Seed
from scrape.models import Item

PROJECTS = "/admin/crawl/project/"


@pytest.fixture
def project(make_project):
    return make_project(name="console", allow_private=True)


def add_page(project, url: str, state: str = "done", **fields) -> Page:
    host = url.split("/")[2]
    key = hashlib.sha256(url.encode()).hexdigest()
    return Page.objects.create(project=project, url=url, url_key=key, host=host, state=state, **fields)


def run_action(client, changelist: str, action: str, ids: list[int]):
    response = client.post(changelist, {"action": action, "_selected_action": [str(i) for i in ids]})
    assert response.status_code == 302, response.content[:500]
    return response


def add_form_data(response) -> dict:
    """The add form's defaults, as a browser posts them (no extra inline rows)."""
    data = {}
    for name, field in response.context["adminform"].form.fields.items():
        value = field.initial() if callable(field.initial) else field.initial
        if value is None or value is False:
            continue
        data[name] = "on" if value is True else json.dumps(value) if isinstance(value, (dict, list)) else value
    for formset in response.context["inline_admin_formsets"]:
        fs = formset.formset
        data.update({f"{fs.prefix}-{k}": v for k, v in fs.management_form.initial.items()})
        data[f"{fs.prefix}-TOTAL_FORMS"] = 0
    return data


def test_it_pauses_resumes_and_starts_projects_from_the_list(admin_client, project):
    Seed.objects.create(project=project, url="http://127.0.0.1:9/")
    run_action(admin_client, PROJECTS, "pause", [project.id])
    assert Project.objects.get(id=project.id).status == "paused"
    run_action(admin_client, PROJECTS, "resume", [project.id])
    assert Project.objects.get(id=project.id).status == "active"
    run_action(admin_client, PROJECTS, "start", [project.id])
    (seed_page,) = Page.objects.filter(project=project)
    assert (seed_page.url, seed_page.state, seed_page.is_seed) == ("http://127.0.0.1:9/", "queued", True)
    assert seed_page.enqueued_at is not None, "start publishes the queued pages"


def test_retry_all_failed_requeues_only_the_failed_pages(admin_client, project):
    failed = add_page(project, "http://a.test/x", "failed", error_code="http_500", error_message="oops", attempts=3)
    done = add_page(project, "http://a.test/y", "done")
    run_action(admin_client, PROJECTS, "retry_failed", [project.id])
    failed.refresh_from_db()
    assert (failed.state, failed.error_code, failed.attempts) == ("queued", "", 0)
    assert Page.objects.get(id=done.id).state == "done"


def test_page_actions_retry_and_requeue_the_selected_rows(admin_client, project):
    failed = add_page(project, "http://a.test/f", "failed", error_code="dns_error")
    done = add_page(project, "http://a.test/d", "done")
    leased = add_page(project, "http://a.test/l", "leased")
    run_action(admin_client, "/admin/crawl/page/", "retry_pages", [failed.id, done.id])
    assert Page.objects.get(id=failed.id).state == "queued"
    assert Page.objects.get(id=done.id).state == "done", "retry touches failed rows only"
    run_action(admin_client, "/admin/crawl/page/", "requeue_pages", [done.id, leased.id])
    assert Page.objects.get(id=done.id).state == "queued"
    assert Page.objects.get(id=leased.id).state == "leased", "work in flight is left alone"


def test_the_failures_list_shows_failed_pages_only_and_retries_whole_projects(admin_client, project):
    other = Project.objects.create(name="other", slug="other")
    one = add_page(project, "http://a.test/1", "failed", error_code="http_404", error_message="gone for good")
    two = add_page(project, "http://a.test/2", "failed", error_code="connect_error")
    add_page(project, "http://a.test/ok", "done")
    theirs = add_page(other, "http://b.test/1", "failed", error_code="http_404")
    html = admin_client.get("/admin/crawl/failedpage/").content.decode()
    assert "http://a.test/1" in html and "gone for good" in html and "http://b.test/1" in html
    assert "http://a.test/ok" not in html
    filtered = admin_client.get("/admin/crawl/failedpage/", {"error_code": "connect_error"}).content.decode()
    assert "http://a.test/2" in filtered and "http://a.test/1" not in filtered
    run_action(admin_client, "/admin/crawl/failedpage/", "retry_projects", [one.id])
    assert set(Page.objects.filter(id__in=[one.id, two.id]).values_list("state", flat=True)) == {"queued"}
    assert Page.objects.get(id=theirs.id).state == "failed", "another project's failures stay"


def test_it_blocks_and_unblocks_hosts(admin_client, project):
    host = Host.objects.create(host="a.test")
    page = add_page(project, "http://a.test/b", "failed", error_code="host_blocked")
    run_action(admin_client, "/admin/crawl/host/", "block_hosts", [host.id])
    host.refresh_from_db()
    assert host.blocked and "admin" in host.blocked_reason
    run_action(admin_client, "/admin/crawl/host/", "unblock_hosts", [host.id])
    host.refresh_from_db()
    assert (host.blocked, host.blocked_reason) == (False, "")
    assert Page.objects.get(id=page.id).state == "queued", "its host_blocked pages get another chance"


def test_pasted_seeds_are_added_and_queued(admin_client):
    data = add_form_data(admin_client.get(f"{PROJECTS}add/"))
    data |= {"name": "pasted", "slug": "pasted", "allow_private": "on"}
    data["bulk_seeds"] = "http://127.0.0.1:9/a\n\n  http://127.0.0.1:9/b  \n"
    response = admin_client.post(f"{PROJECTS}add/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    project = Project.objects.get(slug="pasted")
    assert sorted(project.seeds.values_list("url", flat=True)) == ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"]
    assert Page.objects.filter(project=project, is_seed=True).count() == 2


def test_pasted_seeds_are_refused_with_the_reason_and_nothing_is_saved(admin_client):
    data = add_form_data(admin_client.get(f"{PROJECTS}add/"))
    data |= {"name": "refused", "slug": "refused", "bulk_seeds": "http://127.0.0.1:9/a\nftp://example.com/file"}
    response = admin_client.post(f"{PROJECTS}add/", data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["bulk_seeds"]
    assert any(e.startswith("line 1: http://127.0.0.1:9/a: blocked_address") for e in errors), errors
    assert any(e.startswith("line 2: ftp://example.com/file: blocked_scheme") for e in errors), errors
    assert not Project.objects.filter(slug="refused").exists()


def test_an_inline_seed_on_loopback_is_accepted_when_the_new_project_allows_private(admin_client):
    data = add_form_data(admin_client.get(f"{PROJECTS}add/"))
    data |= {"name": "inline", "slug": "inline", "seeds-TOTAL_FORMS": 1, "seeds-0-url": "http://127.0.0.1:9/"}
    data |= {"seeds-0-kind": "page", "seeds-0-active": "on", "seeds-0-method": "GET", "seeds-0-headers": "{}"}
    data |= {"seeds-0-priority": "0"}  # the form's initial value, as a browser sends it
    refused = admin_client.post(f"{PROJECTS}add/", data)
    assert refused.status_code == 200
    assert "blocked_address" in str(refused.context["inline_admin_formsets"][0].formset.errors)
    response = admin_client.post(f"{PROJECTS}add/", data | {"allow_private": "on"})
    assert response.status_code == 302
    assert Seed.objects.get(project__slug="inline").url == "http://127.0.0.1:9/"


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/admin/crawl/page/", {}),
        ("/admin/crawl/page/", {"host": "a.test", "status_code": "200", "state": "done"}),
        ("/admin/crawl/failedpage/", {"host": "a.test"}),
        ("/admin/media/mediaasset/", {"downloader": "http"}),
        ("/admin/scrape/item/", {"kind": "page"}),
    ],
)
def test_the_big_lists_render_with_their_rows_and_filters(admin_client, project, path, query):
    page = add_page(project, "http://a.test/listed", "done", status_code=200, content_type="text/html")
    add_page(project, "http://a.test/broken", "failed", error_code="http_500")
    MediaAsset.objects.create(project=project, url="http://a.test/listed.jpg", url_key="1" * 64, kind="image")
    Item.objects.create(project=project, page=page, kind="page", data={"title": "Listed"})
    response = admin_client.get(path, query)
    assert response.status_code == 200
    html = response.content.decode()
    assert "http://a.test/listed" in html or "http://a.test/broken" in html


def test_the_page_filters_offer_values_of_recent_rows(admin_client, project):
    add_page(project, "http://a.test/one", "done", status_code=200)
    add_page(project, "http://b.test/two", "failed", status_code=503, error_code="http_503")
    html = admin_client.get("/admin/crawl/page/").content.decode()
    for choice in ("?host=a.test", "?host=b.test", "?status_code=503", "?error_code=http_503"):
        assert f'href="{choice}"' in html, choice


def test_the_host_list_shows_politeness_state(admin_client):
    until = timezone.now() + timedelta(minutes=5)
    Host.objects.create(host="slow.test", crawl_delay=2.5, backoff_until=until, blocked=True, blocked_reason="rude")
    html = admin_client.get("/admin/crawl/host/").content.decode()
    assert "slow.test" in html and "2.5" in html and "rude" in html


def test_the_item_page_shows_its_data_pretty_printed(admin_client, project):
    page = add_page(project, "http://a.test/item", "done")
    item = Item.objects.create(project=project, page=page, kind="rule:product", data={"name": "Lamp", "price": 12})
    listing = admin_client.get("/admin/scrape/item/").content.decode()
    assert f'href="/admin/crawl/page/{page.id}/change/"' in listing
    detail = unescape(admin_client.get(f"/admin/scrape/item/{item.id}/change/").content.decode())
    assert '"name": "Lamp",\n  "price": 12' in detail


def test_asset_thumbnails_show_the_stored_image(admin_client, project, tmp_path):
    data = b"\x89PNG\r\n\x1a\n" + bytes(range(200))
    sha256 = hashlib.sha256(data).hexdigest()
    (tmp_path / "img").write_bytes(data)
    key = store_file(str(tmp_path / "img"), sha256=sha256, size=len(data))
    asset = MediaAsset.objects.create(
        project=project, url="http://a.test/i.png", url_key="2" * 64, kind="image", state="done", mime="image/png"
    )
    MediaAsset.objects.filter(id=asset.id).update(storage_key=key, sha256=sha256, size=len(data))
    html = admin_client.get("/admin/media/mediaasset/").content.decode()
    object_path = f"/admin/media/mediaasset/{asset.id}/object/"
    assert f'<img src="{object_path}"' in html
    response = admin_client.get(object_path)
    assert b"".join(response.streaming_content) == data
    assert response["Content-Type"] == "image/png"


def test_retry_failed_assets(admin_client, project):
    asset = MediaAsset.objects.create(
        project=project, url="http://a.test/v.mp4", url_key="3" * 64, state="failed", error_code="http_503"
    )
    run_action(admin_client, "/admin/media/mediaasset/", "retry_failed", [asset.id])
    asset.refresh_from_db()
    assert (asset.state, asset.error_code) == ("queued", "")


def test_the_dashboard_data_counts_what_the_rows_say(admin_client, project):
    now = timezone.now()
    for i in range(3):
        add_page(project, f"http://a.test/new{i}", "done", fetched_at=now - timedelta(minutes=1))
    for i in range(2):
        add_page(project, f"http://a.test/half{i}", "extracted", fetched_at=now - timedelta(minutes=30))
    add_page(project, "http://a.test/old", "done", fetched_at=now - timedelta(hours=3))
    add_page(project, "http://a.test/older", "done", fetched_at=now - timedelta(days=2))
    add_page(project, "http://a.test/q", "queued")
    for i, (host, code) in enumerate([("a.test", "http_404"), ("b.test", "http_404"), ("b.test", "dns_error")]):
        add_page(project, f"http://{host}/bad{i}", "failed", error_code=code, error_message=f"reason {i}")
    MediaAsset.objects.create(project=project, url="http://a.test/1.jpg", url_key="4" * 64, state="done")

    data = admin_client.get("/admin/dashboard/data/", {"project": project.id}).json()
    assert set(data) >= {"pages", "assets", "rates", "backlog", "queues", "errors_by_code", "errors_by_host"}
    assert set(data) >= {"recent_failures", "throughput", "pending", "project"}
    assert data["pages"] == {"queued": 1, "leased": 0, "fetched": 0, "extracted": 2, "done": 5, "failed": 3}
    assert data["assets"] == {"queued": 0, "leased": 0, "done": 1, "failed": 0}
    assert {k: v["pages"] for k, v in data["rates"].items()} == {"5m": 3, "1h": 5, "1d": 6}
    assert data["rates"]["5m"]["per_minute"] == 0.6
    assert data["backlog"] == {"fetch": 1, "extract": 0, "download": 0}
    assert set(data["queues"]) >= {"fetch", "extract", "download"}
    assert data["errors_by_code"] == [["http_404", 2, 0], ["dns_error", 1, 0]]
    assert data["errors_by_host"] == [["b.test", 2, 0], ["a.test", 1, 0]]
    assert [f["error_message"] for f in data["recent_failures"]] == ["reason 2", "reason 1", "reason 0"]
    assert len(data["throughput"]) == 60, "from the health counters (tests/console/test_dashboard_panels.py)"


def test_the_dashboard_page_is_for_staff_only(admin_client, client, project):
    page = admin_client.get("/admin/dashboard/", {"project": project.id})
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="dashboard-initial"' in html and "console/dashboard.js" in html
    assert client.get("/admin/dashboard/").status_code == 302
    assert client.get("/admin/dashboard/data/", {"project": project.id}).status_code == 302
    assert "/admin/dashboard/" in admin_client.get("/admin/").content.decode(), "linked from the admin index"


def test_the_export_view_streams_json_lines_and_csv(admin_client, project):
    Page.objects.bulk_create(
        [Page(project=project, url=f"http://a.test/e{i}", url_key=f"{i:064d}", host="a.test") for i in range(501)]
    )
    response = admin_client.get(f"{PROJECTS}{project.id}/export/", {"format": "jsonl", "what": "pages"})
    assert response.streaming and response["Content-Type"].startswith("application/x-ndjson")
    rows = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert [r["url"] for r in rows] == [f"http://a.test/e{i}" for i in range(501)]
    response = admin_client.get(f"{PROJECTS}{project.id}/export/", {"format": "csv", "what": "pages"})
    table = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(table) == 501 and table[-1]["url"] == "http://a.test/e500", "one header, every row"
    assert admin_client.get(f"{PROJECTS}{project.id}/export/", {"what": "secrets"}).status_code == 400


def test_a_huge_page_list_is_counted_only_up_to_a_cap(admin_client, project):
    from console.admin.lists import COUNT_CAP

    rows = [Page(project=project, url=f"http://a.test/{i}", url_key=f"{i:064d}", host="a.test") for i in range(10_005)]
    Page.objects.bulk_create(rows, batch_size=2000)
    assert len(rows) > COUNT_CAP
    response = admin_client.get("/admin/crawl/page/")
    assert response.status_code == 200
    assert response.context["cl"].result_count == COUNT_CAP
    assert f"more than {COUNT_CAP} pages" in response.content.decode()
    small = admin_client.get("/admin/crawl/page/", {"q": "a.test/9999"})
    assert small.context["cl"].result_count == 1, "a filtered list that fits under the cap is counted exactly"


def test_the_dashboard_without_projects_says_so(admin_client, db):
    assert "No project yet" in admin_client.get("/admin/dashboard/").content.decode()
    assert admin_client.get("/admin/dashboard/data/").status_code == 404


def test_the_project_list_links_to_the_dashboard_and_the_exports(admin_client, project):
    body = unescape(admin_client.get(PROJECTS).content.decode())
    assert f'href="/admin/dashboard/?project={project.id}"' in body
    assert f'href="/admin/crawl/project/{project.id}/export/?format=csv&what=items"' in body
    response = run_action(admin_client, PROJECTS, "export_pages", [project.id])
    assert response["Location"] == f"/admin/crawl/project/{project.id}/export/?format=jsonl&what=pages"


def test_the_admin_refuses_bad_patterns_and_lists_naming_the_line(admin_client):
    data = add_form_data(admin_client.get(f"{PROJECTS}add/"))
    data |= {
        "name": "refused",
        "slug": "refused",
        "allow_patterns": r"/p\d{1,3}\.html" + "\n[a-",
        "media_page_patterns": "(?P<x",
        "media_extensions": ".jpg, .mp4",
        "media_mime_types": "image/*\nvideo",
        "allowed_domains": "a.test, b.test",
    }
    response = admin_client.post(f"{PROJECTS}add/", data)
    assert response.status_code == 200, "the form comes back with the errors"
    errors = response.context["adminform"].form.errors
    assert errors["allow_patterns"][0].startswith("line 2: '[a-' is not a regular expression")
    assert errors["media_page_patterns"][0].startswith("line 1: '(?P<x' is not a regular expression")
    assert errors["media_extensions"] == ["line 1: '.jpg, .mp4' is not a file extension (one per line)"]
    assert errors["media_mime_types"] == ["line 2: 'video' is not a MIME type (one per line)"]
    assert errors["allowed_domains"] == ["line 1: 'a.test, b.test' is not one host name (one per line)"]
    assert not Project.objects.filter(slug="refused").exists()
