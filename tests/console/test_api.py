"""The REST API on the real database: auth, projects and seeds, filters, assets, actions, exports, cursors."""

import base64
import csv
import hashlib
import io
import json
import urllib.request

import pytest
import redis
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import override_settings
from django_celery_beat.models import PeriodicTask
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from console.exports.rows import ASSET_FIELDS, PAGE_FIELDS
from console.models import Job
from core.canonical import url_key
from core.storage import store_file
from crawl.models import MediaAsset, Page, Project, Seed
from crawl.services.projects import project_get_or_create
from scrape.models import Item
from tests.s3 import s3_storages

pytestmark = pytest.mark.django_db

ANONYMOUS_REQUESTS = [
    ("get", "/api/projects/"),
    ("post", "/api/projects/"),
    ("get", "/api/projects/shop/"),
    ("patch", "/api/projects/shop/"),
    ("delete", "/api/projects/shop/"),
    ("post", "/api/projects/shop/start/"),
    ("post", "/api/projects/shop/pause/"),
    ("post", "/api/projects/shop/resume/"),
    ("post", "/api/projects/shop/recrawl/"),
    ("post", "/api/projects/shop/retry-failed/"),
    ("get", "/api/projects/shop/progress/"),
    ("get", "/api/projects/shop/export/?format=csv"),
    ("get", "/api/seeds/"),
    ("post", "/api/seeds/"),
    ("get", "/api/pages/"),
    ("post", "/api/pages/retry/"),
    ("get", "/api/failures/"),
    ("get", "/api/items/"),
    ("get", "/api/assets/"),
    ("get", "/api/schema/"),
    ("get", "/api/docs/"),
]


@pytest.fixture
def token(django_user_model) -> Token:
    # A superuser: these tests are about the API's behaviour; tests/console/test_permissions.py is about who may.
    user = django_user_model.objects.create_user("operator", password="not-used", is_superuser=True)
    return Token.objects.create(user=user)


@pytest.fixture
def api(token) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def shop() -> Project:
    project = project_get_or_create(name="Shop", allow_private=False)
    assert project.slug == "shop"
    return project


def make_page(project: Project, path: str, state: str = "done", host: str = "shop.test", **fields) -> Page:
    url = f"http://{host}{path}"
    return Page.objects.create(project=project, url=url, url_key=url_key(url), host=host, state=state, **fields)


def fetch_queue_length() -> int:
    return redis.Redis.from_url(settings.CELERY_BROKER_URL).llen("fetch")


# --- Authentication ------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), ANONYMOUS_REQUESTS)
def test_it_refuses_every_endpoint_without_authentication(shop, method, path):
    make_page(shop, "/secret", title="secret title")
    response = getattr(APIClient(), method)(path)
    assert response.status_code == 401, response.content
    assert b"secret title" not in response.content
    shop.refresh_from_db()
    assert shop.status == Project.Status.ACTIVE
    assert Project.objects.filter(slug="shop").exists()


def test_it_authenticates_with_a_token_and_refuses_a_wrong_one(api, shop):
    response = api.get("/api/projects/")
    assert response.status_code == 200
    assert [p["slug"] for p in response.json()["results"]] == ["shop"]
    wrong = APIClient()
    wrong.credentials(HTTP_AUTHORIZATION="Token 0000000000000000000000000000000000000000")
    assert wrong.get("/api/projects/").status_code == 401


def test_it_serves_the_schema_and_the_docs_to_authenticated_users(api):
    schema = api.get("/api/schema/?format=json")
    assert schema.status_code == 200
    paths = json.loads(schema.content)["paths"]
    assert {"/api/projects/{slug}/export/", "/api/pages/", "/api/assets/"} <= set(paths)
    docs = api.get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger-ui" in docs.content


# --- Projects ------------------------------------------------------------------------------------


def test_it_creates_reads_updates_and_deletes_a_project(api):
    created = api.post(
        "/api/projects/", {"name": "Big Shop", "max_depth": 3, "request_headers": {"X-A": "1"}}, format="json"
    )
    assert created.status_code == 201, created.json()
    assert created.json()["slug"] == "big-shop"
    assert created.json()["status"] == "active"
    assert api.get("/api/projects/big-shop/").json()["max_depth"] == 3

    updated = api.patch("/api/projects/big-shop/", {"max_depth": 5, "status": "active"}, format="json")
    assert updated.status_code == 200, "the status sent back unchanged is fine"
    project = Project.objects.get(slug="big-shop")
    assert (project.max_depth, project.status, project.request_headers) == (5, "active", {"X-A": "1"})
    refused = api.patch("/api/projects/big-shop/", {"status": "paused"}, format="json")
    assert refused.status_code == 400 and "pause" in refused.json()["status"][0], "never silently ignored"

    assert api.delete("/api/projects/big-shop/").status_code == 204
    assert api.get("/api/projects/big-shop/").status_code == 404
    assert not Project.objects.filter(name="Big Shop").exists()


def test_it_refuses_a_duplicate_name_and_a_slug_that_is_taken(api, shop):
    response = api.post("/api/projects/", {"name": "Shop"}, format="json")
    assert response.status_code == 400
    assert "name" in response.json()
    response = api.post("/api/projects/", {"name": "Other", "slug": "shop"}, format="json")
    assert response.status_code == 400
    assert "slug" in response.json()


def test_it_refuses_an_unknown_field_naming_it_instead_of_ignoring_it(api, shop):
    response = api.post("/api/projects/", {"name": "Limited", "maxpages": 5}, format="json")
    assert response.status_code == 400
    assert response.json() == {"maxpages": ["Unknown field. Did you mean 'max_pages'?"]}
    assert not Project.objects.filter(name="Limited").exists()
    response = api.patch("/api/projects/shop/", {"max_depht": 2}, format="json")
    assert response.status_code == 400 and "max_depht" in response.json()
    response = api.post("/api/seeds/", {"project": "shop", "url": "http://8.8.8.8/", "prio": 3}, format="json")
    assert response.status_code == 400 and list(response.json()) == ["prio"]
    response = api.post("/api/projects/shop/retry-failed/", {"error": "http_500"}, format="json")
    assert response.status_code == 400 and "error" in response.json()


def test_a_name_that_differs_only_in_case_or_punctuation_is_the_same_project_everywhere(api, shop):
    response = api.post("/api/projects/", {"name": "shop!"}, format="json")
    assert response.status_code == 400
    assert "'Shop' (slug shop)" in response.json()["name"][0]
    assert list(Project.objects.values_list("slug", flat=True)) == ["shop"], "no shop-2"
    err = io.StringIO()
    with pytest.raises(CommandError):  # the seed is refused; the project it used is what matters
        call_command("crawl", "http://127.0.0.1:9/", "--project", "SHOP", "--timeout", "1", stderr=err)
    assert "using the existing project Shop (" in err.getvalue() and "'SHOP' names it too" in err.getvalue()
    assert list(Project.objects.values_list("slug", flat=True)) == ["shop"]


def test_it_validates_the_recrawl_schedule_with_the_model_rules(api, shop):
    both = api.patch("/api/projects/shop/", {"recrawl_every_minutes": 10, "recrawl_crontab": "0 * * * *"})
    assert both.status_code == 400
    assert "not both" in json.dumps(both.json())
    bad = api.patch("/api/projects/shop/", {"recrawl_crontab": "99 * * * *"}, format="json")
    assert bad.status_code == 400
    assert "recrawl_crontab" in bad.json()
    good = api.patch("/api/projects/shop/", {"recrawl_crontab": "*/15 * * * *"}, format="json")
    assert good.status_code == 200
    task = PeriodicTask.objects.get(name__endswith=f"project {shop.id}")
    assert task.crontab.minute == "*/15"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("api_config", ["not", "an", "object"]),
        ("api_config", "text"),
        ("api_config", {"records": "items", "unknown_key": 1}),
        ("request_headers", ["X-A: 1"]),
        ("request_headers", {"Bad Header": "1"}),
        ("request_headers", {"X-A": "line\r\nbreak"}),
        ("cookies", {"session": {"nested": "object"}}),
        ("deny_patterns", "(unclosed"),
        ("media_kinds", "image,pdf"),
        ("max_depth", 10**30),
        ("min_delay", -1),
        ("concurrency", 0),
        ("name", "nul\x00byte"),
    ],
)
def test_it_answers_bad_project_fields_with_a_field_error(api, shop, field, value):
    response = api.patch("/api/projects/shop/", {field: value}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()


def test_it_refuses_nul_characters_inside_json_objects(api, shop):
    response = api.patch("/api/projects/shop/", {"api_config": {"records": "a\x00b"}}, format="json")
    assert response.status_code == 400
    assert "NUL" in response.json()["api_config"][0]


def test_it_answers_json_nested_too_deeply_with_400(api, shop):
    response = api.post("/api/projects/", "[" * 100_000 + "]" * 100_000, content_type="application/json")
    assert response.status_code == 400
    assert "nested too deeply" in response.json()["detail"]
    nested: dict = {}
    for _ in range(30):
        nested = {"x": nested}
    response = api.patch("/api/projects/shop/", {"api_config": {"schema": nested}}, format="json")
    assert response.status_code == 400
    assert "nested deeper" in response.json()["api_config"][0]


def test_it_answers_404_for_a_slug_that_cannot_exist(api, shop):
    assert api.get("/api/projects/no%00such/").status_code == 404
    assert api.get("/api/projects/%C3%A9t%C3%A9/").status_code == 404


# --- Seeds ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "reason"),
    [("ftp://x", "blocked_scheme"), ("http://127.0.0.1/", "blocked_address"), ("javascript:alert(1)", "blocked")],
)
def test_it_refuses_a_seed_the_crawler_would_refuse_with_the_reason(api, shop, url, reason):
    response = api.post("/api/seeds/", {"project": "shop", "url": url}, format="json")
    assert response.status_code == 400
    assert reason in response.json()["url"][0]
    assert not Seed.objects.exists()


def test_it_accepts_a_private_seed_when_the_project_allows_private_addresses(api, shop):
    Project.objects.filter(id=shop.id).update(allow_private=True)
    response = api.post("/api/seeds/", {"project": "shop", "url": "http://127.0.0.1:9/"}, format="json")
    assert response.status_code == 201, response.json()


def test_it_queues_and_publishes_a_new_seed_of_an_active_project(api, shop, broker, django_capture_on_commit_callbacks):
    Project.objects.filter(id=shop.id).update(allow_private=True)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/seeds/", {"project": "shop", "url": "http://127.0.0.1:9/start"}, format="json")
    assert response.status_code == 201
    page = Page.objects.get(project=shop, is_seed=True)
    assert (page.url, page.state) == ("http://127.0.0.1:9/start", "queued")
    assert fetch_queue_length() == 1


def test_it_queues_but_does_not_publish_a_seed_of_a_paused_project(
    api, shop, broker, django_capture_on_commit_callbacks
):
    assert api.post("/api/projects/shop/pause/").status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/seeds/", {"project": "shop", "url": "http://example.com/"}, format="json")
    assert response.status_code == 201
    assert Page.objects.get(project=shop, is_seed=True).state == "queued"
    assert fetch_queue_length() == 0


def test_it_lists_updates_and_deletes_seeds_by_project(api, shop):
    other = project_get_or_create(name="Other")
    Seed.objects.create(project=shop, url="http://example.com/a")
    Seed.objects.create(project=other, url="http://example.com/b")
    listed = api.get("/api/seeds/?project=shop").json()["results"]
    assert [s["url"] for s in listed] == ["http://example.com/a"]
    seed_id = listed[0]["id"]
    assert api.patch(f"/api/seeds/{seed_id}/", {"active": False}, format="json").json()["active"] is False
    moved = api.patch(f"/api/seeds/{seed_id}/", {"project": "other"}, format="json")
    assert moved.status_code == 400
    assert api.delete(f"/api/seeds/{seed_id}/").status_code == 204
    assert list(Seed.objects.values_list("url", flat=True)) == ["http://example.com/b"]
    assert api.get("/api/seeds/?project=nope").status_code == 400


def test_it_refuses_a_duplicate_seed(api, shop):
    Seed.objects.create(project=shop, url="http://example.com/")
    response = api.post("/api/seeds/", {"project": "shop", "url": "http://example.com/"}, format="json")
    assert response.status_code == 400
    assert "already" in response.json()["url"][0]


# --- Pages, failures, items ----------------------------------------------------------------------


def test_it_filters_pages_and_never_returns_the_body(api, shop):
    other = project_get_or_create(name="Other")
    html = make_page(shop, "/a", status_code=200, content_type="text/html; charset=utf-8", depth=1)
    make_page(shop, "/b", status_code=404, content_type="text/plain", depth=2, state="failed", error_code="http_404")
    make_page(shop, "/c", host="cdn.test", status_code=200, content_type="image/png", depth=2)
    make_page(other, "/a", status_code=200)

    def urls(query: str) -> list[str]:
        response = api.get(f"/api/pages/?{query}")
        assert response.status_code == 200, response.content
        return sorted(p["url"] for p in response.json()["results"])

    assert urls("project=shop&status_code=200") == ["http://cdn.test/c", "http://shop.test/a"]
    assert urls("project=shop&state=failed") == ["http://shop.test/b"]
    assert urls("project=shop&host=cdn.test") == ["http://cdn.test/c"]
    assert urls("project=shop&depth=2") == ["http://cdn.test/c", "http://shop.test/b"]
    assert urls("error_code=http_404") == ["http://shop.test/b"]
    assert urls("project=shop&content_type=text/html") == ["http://shop.test/a"]
    detail = api.get(f"/api/pages/{html.id}/").json()
    assert detail["project"] == "shop"
    assert not {"body", "content", "request", "lease_token"} & set(detail)


@pytest.mark.parametrize(
    "query",
    [
        "status_code=abc",
        "status_code=99999999999999999999999",
        "depth=-1",
        "state=nonsense",
        "project=no-such-project",
        "project=%00",
        f"host={'h' * 300}",
        "host=a%00b",
    ],
)
def test_it_answers_bad_filter_values_with_400(api, shop, query):
    response = api.get(f"/api/pages/?{query}")
    assert response.status_code == 400, response.content
    assert query.split("=")[0] in response.json()


def test_it_lists_failures_by_error_code(api, shop):
    make_page(shop, "/ok")
    make_page(shop, "/gone", state="failed", error_code="http_404", error_message="Not Found")
    make_page(shop, "/slow", state="failed", error_code="read_timeout")
    response = api.get("/api/failures/?project=shop&error_code=http_404").json()["results"]
    assert [(f["url"], f["error_message"]) for f in response] == [("http://shop.test/gone", "Not Found")]
    assert len(api.get("/api/failures/?project=shop").json()["results"]) == 2


def test_it_lists_items_by_page_and_kind(api, shop):
    first, second = make_page(shop, "/1"), make_page(shop, "/2")
    Item.objects.create(project=shop, page=first, kind="page", data={"title": "One"})
    Item.objects.create(project=shop, page=first, kind="rule:product", data={"price": 3})
    Item.objects.create(project=shop, page=second, kind="page", data={"title": "Two"})
    items = api.get(f"/api/items/?project=shop&page={first.id}&kind=page").json()["results"]
    assert [(i["url"], i["data"]) for i in items] == [("http://shop.test/1", {"title": "One"})]
    assert api.get("/api/items/?page=abc").status_code == 400


# --- Assets --------------------------------------------------------------------------------------


def stored_asset(project: Project, tmp_path, data: bytes) -> MediaAsset:
    source = tmp_path / "download.bin"
    source.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    key = store_file(str(source), sha256=sha, size=len(data))
    return MediaAsset.objects.create(
        project=project,
        url="http://shop.test/cat.jpg",
        url_key=url_key("http://shop.test/cat.jpg"),
        kind="image",
        state="done",
        sha256=sha,
        size=len(data),
        storage_key=key,
    )


def test_it_gives_a_stored_asset_a_download_url_on_disk(api, shop, tmp_path):
    stores = {
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "assets"), "base_url": "/assets/"},
        },
        "staticfiles": settings.STORAGES["staticfiles"],
    }
    with override_settings(STORAGES=stores):
        asset = stored_asset(shop, tmp_path, b"jpeg bytes")
        MediaAsset.objects.create(project=shop, url="http://shop.test/q.jpg", url_key="q" * 64, kind="image")
        rows = api.get("/api/assets/?project=shop&kind=image").json()["results"]
    by_url = {r["url"]: r["download_url"] for r in rows}
    assert by_url == {
        "http://shop.test/cat.jpg": f"http://testserver/assets/{asset.storage_key}",
        "http://shop.test/q.jpg": None,
    }
    assert api.get("/api/assets/?state=bogus").status_code == 400


def test_it_gives_a_stored_asset_a_presigned_url_on_s3(api, shop, tmp_path, s3_endpoint, bucket):
    data = b"\xff\xd8 a real jpeg would be longer"
    with override_settings(STORAGES=s3_storages(s3_endpoint, bucket[1])):
        asset = stored_asset(shop, tmp_path, data)
        row = api.get(f"/api/assets/{asset.id}/").json()
    assert row["download_url"].startswith(f"{s3_endpoint}/{bucket[1]}/{asset.storage_key}?")
    assert "X-Amz-Signature=" in row["download_url"]
    with urllib.request.urlopen(row["download_url"], timeout=10) as response:
        assert response.read() == data


# --- Actions -------------------------------------------------------------------------------------


def test_it_pauses_and_resumes_a_project(api, shop, broker, django_capture_on_commit_callbacks):
    make_page(shop, "/1", state="queued")
    make_page(shop, "/2", state="queued")
    make_page(shop, "/3", state="done")
    paused = {"project": "shop", "status": "paused", "job": None, "changed": True}
    assert api.post("/api/projects/shop/pause/").json() == paused, "no job runs: the project itself pauses"
    assert api.post("/api/projects/shop/pause/").json()["changed"] is False
    assert Project.objects.get(id=shop.id).status == "paused"
    with django_capture_on_commit_callbacks(execute=True):
        resumed = api.post("/api/projects/shop/resume/").json()
    job = Job.objects.get(project=shop)
    assert resumed == {"project": "shop", "status": "active", "job": job.id, "published": 2}, "its owed work is a job"
    assert (job.kind, job.trigger) == ("crawl", "api")
    assert Project.objects.get(id=shop.id).status == "active"
    assert fetch_queue_length() == 1  # one batch for the host's two pages


def test_it_starts_a_paused_project_with_its_seeds(api, shop):
    Project.objects.filter(id=shop.id).update(status="paused")
    Seed.objects.create(project=shop, url="http://example.com/")
    response = api.post("/api/projects/shop/start/")
    job = Job.objects.get(project=shop)
    assert response.json() == {"project": "shop", "status": "active", "job": job.id, "published": 1}
    assert (job.kind, job.trigger, job.state, job.started_by.username) == ("crawl", "api", "queued", "operator")
    assert Page.objects.get(project=shop).url == "http://example.com/"


def test_it_retries_failed_pages_of_one_error_code(api, shop):
    gone = make_page(shop, "/gone", state="failed", error_code="http_404", error_message="Not Found", attempts=1)
    slow = make_page(shop, "/slow", state="failed", error_code="read_timeout", attempts=3)
    done = make_page(shop, "/done")
    response = api.post("/api/projects/shop/retry-failed/", {"error_code": "read_timeout"}, format="json")
    job = Job.objects.get(project=shop)
    assert response.json() == {"requeued": 1, "job": job.id} and job.kind == "retry"
    states = dict(Page.objects.values_list("id", "state"))
    assert states == {gone.id: "failed", slow.id: "queued", done.id: "done"}
    slow.refresh_from_db()
    assert (slow.attempts, slow.error_code) == (0, "")
    assert api.post("/api/projects/shop/retry-failed/").json() == {"requeued": 1, "job": job.id}, "joins it"
    assert Page.objects.get(id=gone.id).state == "queued"


def test_it_retries_selected_pages_and_only_failed_ones(api, shop):
    failed = [make_page(shop, f"/f{i}", state="failed", error_code="dns_error") for i in range(3)]
    done = make_page(shop, "/done")
    response = api.post("/api/pages/retry/", {"ids": [failed[0].id, failed[1].id, done.id]}, format="json")
    assert response.json() == {"requeued": 2}
    assert sorted(Page.objects.filter(state="queued").values_list("id", flat=True)) == [failed[0].id, failed[1].id]
    assert api.post("/api/pages/retry/", {"ids": "1,2"}, format="json").status_code == 400
    assert api.post("/api/pages/retry/", {"ids": [2**70]}, format="json").status_code == 400


def test_it_recrawls_finished_pages(api, shop):
    make_page(shop, "/1")
    make_page(shop, "/2")
    make_page(shop, "/3", state="failed")
    answer = api.post("/api/projects/shop/recrawl/").json()
    job_id = Job.objects.get(project=shop, kind="recrawl").id
    assert answer == {"project": "shop", "status": "active", "job": job_id, "queued": 2}
    assert Page.objects.filter(state="queued").count() == 2


def test_it_reports_progress(api, shop):
    make_page(shop, "/1")
    make_page(shop, "/2", state="failed", error_code="dns_error")
    make_page(shop, "/3.pdf", content_type="application/pdf", parsed=False)  # done, not parsed: not a failure
    progress = api.get("/api/projects/shop/progress/").json()
    assert progress == {
        "pages": {"done": 2, "failed": 1},
        "assets": {},
        "pending": 0,
        "pages_not_parsed": 1,
        "retrying": [],
        "errors": {"dns_error": 1},
        "warnings": [],
    }


# --- Export --------------------------------------------------------------------------------------


def streamed_text(response) -> str:
    assert response.status_code == 200
    assert response.streaming
    return b"".join(response.streaming_content).decode()


def test_it_streams_pages_as_json_lines_across_batches(api, shop):
    Page.objects.bulk_create(
        [
            Page(project=shop, url=f"http://shop.test/{i}", url_key=url_key(f"http://shop.test/{i}"), host="shop.test")
            for i in range(1203)
        ]
    )
    response = api.get("/api/projects/shop/export/?format=jsonl&what=pages")
    assert response["Content-Type"].startswith("application/x-ndjson")
    assert 'filename="shop-pages.jsonl"' in response["Content-Disposition"]
    rows = [json.loads(line) for line in streamed_text(response).splitlines()]
    assert [r["url"] for r in rows] == [f"http://shop.test/{i}" for i in range(1203)]
    assert set(rows[0]) == set(PAGE_FIELDS)


def test_it_streams_pages_as_csv_with_one_header(api, shop):
    for i in range(3):
        make_page(shop, f"/{i}", title=f"Title, with comma {i}")
    response = api.get("/api/projects/shop/export/?format=csv")
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(streamed_text(response))))
    assert rows[0] == PAGE_FIELDS
    assert [r[PAGE_FIELDS.index("title")] for r in rows[1:]] == [f"Title, with comma {i}" for i in range(3)]


def test_it_exports_items_and_an_empty_csv_with_its_header(api, shop):
    page = make_page(shop, "/p")
    Item.objects.create(project=shop, page=page, kind="page", data={"title": "P"})
    items = [json.loads(line) for line in streamed_text(api.get("/api/projects/shop/export/?what=items")).splitlines()]
    assert [(i["url"], i["data"]) for i in items] == [("http://shop.test/p", {"title": "P"})]
    empty = streamed_text(api.get("/api/projects/shop/export/?what=assets&format=csv"))
    assert empty.splitlines() == [",".join(ASSET_FIELDS)]


@pytest.mark.parametrize("query", ["format=xml", "what=everything", "format=csv&what=%00"])
def test_it_answers_a_bad_export_request_with_400(api, shop, query):
    response = api.get(f"/api/projects/shop/export/?{query}")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"


# --- Cursor pagination ---------------------------------------------------------------------------


def test_it_follows_next_cursors_through_every_page(api, shop):
    pages = [make_page(shop, f"/{i}") for i in range(7)]
    seen, url = [], "/api/pages/?project=shop&page_size=3"
    while url:
        body = api.get(url).json()
        assert len(body["results"]) <= 3
        seen += [p["id"] for p in body["results"]]
        url = body["next"]
    assert seen == sorted((p.id for p in pages), reverse=True)


@pytest.mark.parametrize("cursor", ["garbage", base64.b64encode(b"p=abc").decode(), base64.b64encode(b"o=x").decode()])
def test_it_answers_404_for_an_invalid_cursor(api, shop, cursor):
    make_page(shop, "/1")
    response = api.get("/api/pages/", {"cursor": cursor})
    assert response.status_code == 404
    assert response.json() == {"detail": "Invalid cursor"}


def test_the_api_refuses_a_bad_regex_naming_the_line_and_takes_a_good_one(django_user_model):
    Project.objects.create(name="api", slug="api")
    token = Token.objects.create(user=django_user_model.objects.create_user("operator", is_superuser=True))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    bad = api.patch("/api/projects/api/", {"gallery_page_patterns": "/album/\n*oops"}, format="json")
    assert bad.status_code == 400
    assert bad.json()["gallery_page_patterns"][0].startswith("line 2: '*oops' is not a regular expression")
    bad = api.patch("/api/projects/api/", {"media_mime_types": "image/png,video/mp4"}, format="json")
    assert bad.json()["media_mime_types"] == ["line 1: 'image/png,video/mp4' is not a MIME type (one per line)"]
    good = api.patch("/api/projects/api/", {"allow_patterns": r"/p\d{1,3}\.html"}, format="json")
    assert good.status_code == 200
    assert Project.objects.get(slug="api").allow_patterns == r"/p\d{1,3}\.html"
