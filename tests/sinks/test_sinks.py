"""Result sinks: every kind receives every item of a crawl exactly once, even when the worker dies
after a sink wrote a batch and before the batch was marked delivered (the redelivered records are
recognised by key); a failing sink holds back nothing and says why."""

import io
import json
import os
import tarfile
import zlib
from pathlib import Path

import pytest
import redis
from django.conf import settings

from console.management.commands import sinks as sinks_command  # noqa: F401 - the command module loads
from core.storage import list_keys, open_object
from crawl.models import Page, PageContent, Project
from scrape.models import Item
from scrape.services import pages_extract
from sinks.delivery import sink_counts, sinks_offer
from sinks.kinds import writer_for
from sinks.models import Sink, SinkDelivery
from tests.conftest import last_json_line, migrate_embedded, run_manage

REDIS_SINK_DB = "redis://127.0.0.1:6379/9"


@pytest.fixture
def sink_redis():
    client = redis.Redis.from_url(REDIS_SINK_DB)
    client.flushdb()
    yield client
    client.flushdb()


def records(n: int, start: int = 0) -> list[dict]:
    return [{"key": f"k{i}", "type": "item", "kind": "page", "data": {"i": i}} for i in range(start, start + n)]


def make_sinks(project: Project, tmp_path: Path) -> dict[str, Sink]:
    configs = {
        "files": ("file", {"directory": "{project}/files", "name": "{type}/{key}.json"}),
        "rlist": ("redis", {"url": REDIS_SINK_DB, "key": "{project}:list", "type": "list"}),
        "rhash": ("redis", {"url": REDIS_SINK_DB, "key": "{project}:hash", "type": "hash"}),
        "tars": ("tar", {"directory": "{project}/tars", "compression": "bz2"}),
        "lines": ("jsonl", {"prefix": "sinks/{project}/lines/"}),
        "mine": ("python", {"class": "tests.recording_sink.RecordingSink", "options": {"directory": str(tmp_path)}}),
    }
    made = {}
    for name, (kind, config) in configs.items():
        sink = Sink(project=project, name=name, kind=kind, config=config)
        sink.full_clean()
        sink.save()
        made[name] = sink
    return made


def delivered_keys(sinks: dict[str, Sink], client: redis.Redis, tmp_path: Path) -> dict[str, list[str]]:
    """What each sink holds, read back from the sink itself (not from our rows)."""
    project = next(iter(sinks.values())).project.slug
    root = Path(settings.CRAWL_SINK_ROOT) / project
    found = {"files": [json.loads(p.read_text())["key"] for p in sorted((root / "files").rglob("*.json"))]}
    found["rlist"] = [json.loads(v)["key"] for v in client.lrange(f"{project}:list", 0, -1)]
    found["rhash"] = [json.loads(v)["key"] for v in client.hgetall(f"{project}:hash").values()]
    found["tars"] = []
    for archive in sorted((root / "tars").glob("*.tar.bz2")):
        with tarfile.open(archive) as tar:
            found["tars"] += [json.loads(tar.extractfile(m).read())["key"] for m in tar.getmembers()]
    found["lines"] = []
    for key in list_keys(f"sinks/{project}/lines/"):
        with open_object(key) as stream:
            found["lines"] += [json.loads(line)["key"] for line in io.TextIOWrapper(stream) if line.strip()]
    found["mine"] = [json.loads(p.read_text())["key"] for p in sorted(tmp_path.glob("*.json"))]
    return found


def test_each_kind_recognises_a_redelivered_batch(db, sink_redis, tmp_path):
    project = Project.objects.create(name="direct", slug="direct")
    for sink in make_sinks(project, tmp_path).values():
        writer = writer_for(sink)
        writer.deliver(records(3), batch="b1")
        writer.deliver(records(3), batch="b1")  # the same batch again: the worker died before marking it
        writer_for(sink).deliver(records(2, start=3), batch="b2")
    found = delivered_keys({s.name: s for s in Sink.objects.filter(project=project)}, sink_redis, tmp_path)
    for name, keys in found.items():
        assert sorted(keys) == ["k0", "k1", "k2", "k3", "k4"], name


@pytest.mark.parametrize(
    ("kind", "config", "problem"),
    [
        ("file", {"directory": "../../etc"}, "leaves CRAWL_SINK_ROOT"),
        ("file", {"name": "{nope}.json"}, "placeholders are"),
        ("redis", {"url": "http://x"}, "a redis:// URL"),
        ("tar", {"compression": "zip"}, "compression"),
        ("python", {"class": "os.path.NoSuchThing"}, "not an importable class"),
        ("jsonl", {"bucket": "x"}, "unknown keys"),
    ],
)
def test_a_bad_sink_configuration_is_refused_with_the_reason(db, kind, config, problem):
    from django.core.exceptions import ValidationError

    project = Project.objects.create(name="conf", slug="conf")
    with pytest.raises(ValidationError, match=problem):
        Sink(project=project, name="bad", kind=kind, config=config).full_clean()


def test_offered_records_are_queued_once_per_sink_and_type(db):
    project = Project.objects.create(name="offer", slug="offer")
    items_only = Sink.objects.create(project=project, name="a", kind="file")
    with_pages = Sink.objects.create(project=project, name="b", kind="file", pages=True)
    Sink.objects.create(project=project, name="off", kind="file", active=False)
    offered = [*records(2), {"key": "p0", "type": "page"}]
    assert sinks_offer(project.id, offered) == 5
    assert sinks_offer(project.id, offered) == 0, "a record a sink already has is not queued again"
    assert sink_counts(items_only)["pending"] == 2 and sink_counts(with_pages)["pending"] == 3


def test_a_page_whose_text_reverts_gets_a_record_for_every_version(db):
    """Issue 47, point 12: a page whose text goes A -> B -> A gets three page records (the third
    was never delivered: its key was the first's); extracting a version again adds none."""
    project = Project.objects.create(name="revert", slug="revert")
    sink = Sink.objects.create(project=project, name="pages", kind="file", items=False, pages=True)
    page = Page.objects.create(
        project=project, url="http://a.test/", url_key="a" * 64, host="a.test", status_code=200,
        content_type="text/html",
    )  # fmt: skip
    PageContent.objects.create(page=page, headers={"content-type": "text/html"}, body=b"")
    for text in ("A", "B", "A", "A"):
        body = zlib.compress(f"<title>{text}</title><p>The text is {text}.</p>".encode())
        PageContent.objects.filter(page=page).update(body=body)
        Page.objects.filter(id=page.id).update(state="fetched", lease_token=None)  # as a refetch leaves it
        pages_extract(page_ids=[page.id])
    records = SinkDelivery.objects.filter(sink=sink).order_by("id").values_list("record", flat=True)
    assert [r["title"] for r in records] == ["A", "B", "A"], "one record per version, the revert too"
    assert [r["version"] for r in records] == [1, 2, 3]


@pytest.mark.integration
def test_every_kind_gets_every_item_of_a_crawl_exactly_once_across_a_worker_crash(
    site_server, workers, worker_env, sink_redis, tmp_path
):
    project = Project.objects.create(name="sinks", slug="sinks", allow_private=True, download_media=False)
    sinks = make_sinks(project, tmp_path / "mine")
    crash_dir = tmp_path / "crashes"
    env = worker_env | {"CRAWLHUB_FAULT_SINK_CRASH_DIR": str(crash_dir), "CRAWL_SINK_LEASE_SECONDS": "3"}
    workers.env = env
    for stage in ("fetch", "extract"):
        workers.start(stage, stage)
    done = run_manage(["crawl", f"{site_server.url}/", "--project", "sinks", "--json", "--timeout", "240"], env)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = last_json_line(done.stdout)

    assert sorted(p.name for p in crash_dir.iterdir()) == sorted(f"sink-{s.id}" for s in sinks.values()), (
        "a worker died after each sink wrote its first batch"
    )
    expected = sorted(SinkDelivery.objects.filter(sink=sinks["files"]).values_list("key", flat=True))
    items = Item.objects.filter(project=project).count()
    assert items > 250 and len(expected) == items, "one record per stored item"
    found = delivered_keys(sinks, sink_redis, tmp_path / "mine")
    for name, keys in found.items():
        assert sorted(keys) == expected, f"{name}: {len(keys)} records for {len(expected)} items"
        assert summary["sinks"][name]["done"] == items and summary["sinks"][name]["failed"] == 0, name
    handed = (tmp_path / "mine" / "handed.log").read_text().split()
    assert len(handed) > len(set(handed)), "the crashed batch was handed again, and recognised by its keys"


@pytest.mark.fault
def test_a_failing_sink_holds_back_nothing_and_says_why(site_server, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env |= {"CRAWLHUB_VAR_DIR": str(tmp_path / "var"), "DJANGO_SETTINGS_MODULE": "crawlproject.settings"}
    migrate_embedded(env)
    # The project, made by a first crawl of one missing page (it fails: nothing could be crawled).
    made = run_manage(["crawl", f"{site_server.url}/missing/x.html", "--allow-private", "--project", "f"], env)
    assert made.returncode == 1
    broken_sink = json.dumps({"class": "tests.recording_sink.BrokenSink"})
    added = run_manage(["sinks", "f", "--add", "broken", "--kind", "python", "--config", broken_sink], env)
    assert added.returncode == 0, added.stderr
    good = json.dumps({"directory": "{project}/ok"})
    assert run_manage(["sinks", "f", "--add", "ok", "--kind", "file", "--config", good], env).returncode == 0
    refused = run_manage(["sinks", "f", "--add", "x", "--kind", "tar", "--config", '{"compression": "7z"}'], env)
    assert refused.returncode == 1 and "compression" in refused.stderr

    done = run_manage(["crawl", f"{site_server.url}/", "--project", "f", "--json", "--timeout", "240"], env)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = last_json_line(done.stdout)
    assert summary["pages_fetched"] > 250, json.dumps(summary)
    broken, ok = summary["sinks"]["broken"], summary["sinks"]["ok"]
    assert "ConnectionError: the results server is down" in broken["last_error"] and broken["done"] == 0
    assert broken["pending"] + broken["failed"] > 250, "its records wait for it (or failed), none lost"
    assert ok["done"] == summary["items"] and ok["pending"] == 0
    assert "sink broken: 0 delivered" in done.stdout and "failing: ConnectionError" in done.stdout
    listed = run_manage(["sinks", "f"], env)
    assert "broken" in listed.stdout and "ok" in listed.stdout


def test_the_sink_list_shows_what_each_sink_delivered_owes_and_why_it_fails(admin_client):
    project = Project.objects.create(name="listed", slug="listed")
    sink = Sink.objects.create(project=project, name="down", kind="file")
    SinkDelivery.objects.bulk_create(
        [SinkDelivery(sink=sink, key=f"k{i}", record={}, state="done") for i in range(3)]
        + [SinkDelivery(sink=sink, key="k9", record={}, state="pending", error="OSError: disk full")]
    )
    html = admin_client.get("/admin/sinks/sink/").content.decode()
    row = html.split('class="field-name"', 1)[1].split("</tr>", 1)[0]
    assert '<td class="field-delivered">3</td>' in row and '<td class="field-owed">1</td>' in row
    assert "OSError: disk full" in row
