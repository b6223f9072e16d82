"""Operator commands on a real database and broker: addseeds, pause, resume, crawlstats, requeue,
and the --help of every command."""

import io
import json
import re
from datetime import timedelta

import pytest
from django.core.management import call_command, get_commands, load_command_class
from django.core.management.base import CommandError
from django.utils import timezone

from console.models import Job
from console.selectors import broker_queue_lengths
from core.canonical import url_key
from crawl.frontier.pages import pages_claim_for_fetch
from crawl.models import MediaAsset, Page, Project, Seed
from crawl.services.projects import project_get_or_create

COMMANDS = [
    "addseeds",
    "crawl",
    "crawlstats",
    "export",
    "pause",
    "recrawl",
    "reextract",
    "requeue",
    "resume",
    "tryurl",
]


def manage(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def make_page(project: Project, path: str, state: str = "queued", host: str = "a.test", **fields) -> Page:
    url = f"http://{host}{path}"
    return Page.objects.create(project=project, url=url, url_key=url_key(url), host=host, state=state, **fields)


@pytest.mark.parametrize("name", COMMANDS)
def test_it_prints_help_and_exits_0_for_every_command(name, capsys):
    with pytest.raises(SystemExit) as exited:
        call_command(name, "--help")
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:") and f" {name} " in out.splitlines()[0]
    command = load_command_class(get_commands()[name], name)
    assert len(command.help) > 60 and " ".join(command.help.split()[:4]) in " ".join(out.split())
    parser = command.create_parser("manage.py", name)
    assert [a.dest for a in parser._actions if not a.help] == [], "every argument says what it does"


def test_addseeds_adds_and_publishes_good_urls_and_reports_refused_ones(transactional_db, broker):
    project = project_get_or_create(name="seeds")
    out, err = manage(
        "addseeds", "seeds", "http://93.184.215.14/", "ftp://example.com/x", "http://127.0.0.1:9/", "http://8.8.8.8/a"
    )
    job = Job.objects.get(project=project)
    assert out.strip() == f"seeds: added 2 seeds (2 new frontier rows, crawled as job {job.id}), refused 2"
    assert "refused seed ftp://example.com/x: blocked_scheme" in err
    assert "refused seed http://127.0.0.1:9/: blocked_address" in err
    assert set(project.seeds.values_list("url", flat=True)) == {"http://93.184.215.14/", "http://8.8.8.8/a"}
    assert Page.objects.filter(project=project, state="queued", is_seed=True).count() == 2
    assert broker_queue_lengths()["fetch"] == 1, "one wake-up: the fetch stage claims the rows"

    out, _ = manage("addseeds", "seeds", "http://8.8.8.8/a")
    assert out.strip() == "seeds: added 0 seeds (0 new frontier rows), refused 0"


def test_addseeds_reads_a_file_of_urls_with_a_kind(db, broker, tmp_path):
    project_get_or_create(name="feeds", allow_private=True)
    listing = tmp_path / "seeds.txt"
    listing.write_text(
        "# feeds to follow\nhttp://127.0.0.1:8001/feed.xml\n\nhttp//not a url\nhttp://127.0.0.1:8002/rss\n"
    )
    out, err = manage("addseeds", "feeds", "--file", str(listing), "--kind", "feed")
    job = Job.objects.get(project__slug="feeds")
    assert out.strip() == f"feeds: added 2 seeds (2 new frontier rows, crawled as job {job.id}), refused 1"
    assert re.search(r"refused seed http//not a url: invalid_url: ", err)
    seeds = Seed.objects.filter(project__slug="feeds")
    assert sorted(seeds.values_list("url", "kind")) == [
        ("http://127.0.0.1:8001/feed.xml", "feed"),
        ("http://127.0.0.1:8002/rss", "feed"),
    ]
    assert set(Page.objects.filter(project__slug="feeds").values_list("kind", flat=True)) == {"feed"}


def test_addseeds_fails_when_every_url_is_refused(db):
    project_get_or_create(name="refused")
    with pytest.raises(CommandError, match="all 2 seeds refused"):
        manage("addseeds", "refused", "http://127.0.0.1/", "mailto:a@b.test")
    assert not Seed.objects.filter(project__slug="refused").exists()
    with pytest.raises(CommandError, match="no project 'missing'"):
        manage("addseeds", "missing", "http://8.8.8.8/")


def test_pause_stops_claims_and_resume_republishes_queued_pages(transactional_db, broker):
    project = project_get_or_create(name="steer", allow_private=True)
    pages = [make_page(project, f"/p{i}", enqueued_at=None) for i in range(3)]
    make_page(project, "/done", state="done")

    out, _ = manage("pause", "steer")
    assert out.strip() == "steer: paused; 3 queued pages wait for resume"
    assert Project.objects.get(id=project.id).status == "paused"
    _token, claimed = pages_claim_for_fetch([p.id for p in pages])
    assert claimed == []
    assert set(Page.objects.filter(project=project).values_list("state", flat=True)) == {"queued", "done"}
    assert manage("pause", "steer")[0].strip() == "steer: already paused; 3 queued pages wait for resume"

    out, _ = manage("resume", "steer")
    assert out.strip() == "steer: resumed; 3 queued pages published"
    assert Project.objects.get(id=project.id).status == "active"
    assert not Page.objects.filter(project=project, state="queued", enqueued_at=None).exists()
    assert broker_queue_lengths()["fetch"] == 1, "the three pages of one host go out as one batch"
    _token, claimed = pages_claim_for_fetch([p.id for p in pages])
    assert sorted(p.id for p in claimed) == sorted(p.id for p in pages)


@pytest.fixture
def stats_rows(db):
    """Hand-made rows with known counts: 10 pages (3 fetched in the last hour, 2 in 5 min), 4 assets."""
    now = timezone.now()
    project = project_get_or_create(name="stats")
    for i in range(2):
        make_page(project, f"/q{i}")
    make_page(project, "/leased", state="leased")
    make_page(project, "/fetched", state="fetched", fetched_at=now - timedelta(minutes=10))
    make_page(project, "/d1", state="done", fetched_at=now - timedelta(minutes=1))
    make_page(project, "/d2", state="done", fetched_at=now - timedelta(minutes=30))
    make_page(project, "/d3", state="done", fetched_at=now - timedelta(hours=2))
    make_page(project, "/f1", state="failed", error_code="http_404", fetched_at=now - timedelta(minutes=2))
    make_page(project, "/f2", state="failed", error_code="http_404", fetched_at=now - timedelta(hours=3))
    make_page(project, "/f3", state="failed", error_code="dns_error")
    for i, state in enumerate(["done", "done", "queued", "failed"]):
        MediaAsset.objects.create(project=project, url=f"http://a.test/{i}.jpg", url_key=f"{i:064x}", state=state)
    make_page(project_get_or_create(name="other"), "/only")
    return now - timedelta(minutes=1)


def test_crawlstats_json_gives_exact_counts_for_one_project(stats_rows):
    out, _ = manage("crawlstats", "stats", "--json")
    stats = json.loads(out)
    assert stats == {
        "project": "stats",
        "status": "active",
        "pages": {"queued": 2, "leased": 1, "fetched": 1, "extracted": 0, "done": 3, "failed": 3},
        "assets": {"queued": 1, "leased": 0, "done": 2, "failed": 1},
        "errors": {"http_404": 2, "dns_error": 1},
        "owed": {"fetch": 3, "extract": 1, "download": 1},
        "fetched_last_5m": 2,
        "fetched_last_1h": 4,
        "last_fetch_at": stats_rows.isoformat(),
    }
    everyone = json.loads(manage("crawlstats", "--json")[0])
    assert [s["project"] for s in everyone] == ["other", "stats"]
    assert everyone[0]["pages"]["queued"] == 1 and everyone[1] == stats


def test_crawlstats_prints_a_table_and_a_summary(stats_rows):
    out, _ = manage("crawlstats", "stats")
    lines = out.splitlines()
    assert "stats (active)" in out
    for label, count in [("pages done", 3), ("assets done", 2), ("errors http_404", 2), ("owed fetch", 3)]:
        assert any(label in line and re.search(rf"\b{count}\b", line) for line in lines), label
    assert any("fetched last 5 min" in line and re.search(r"\b2\b", line) for line in lines)
    assert lines[-1] == "stats: 10 pages, 3 failed, 5 work items owed"

    out, _ = manage("crawlstats")
    cells = [[c for c in line.split() if c != "│"] for line in out.splitlines() if line.startswith("│")]
    rows = {row[0]: row[1:10] for row in cells}
    assert rows["stats"] == ["active", "2", "1", "1", "0", "3", "3", "2/4", "3/1/1"]
    assert rows["other"] == ["active", "1", "0", "0", "0", "0", "0", "0/0", "1/0/0"]
    assert out.splitlines()[-1] == "2 projects: 11 pages, 3 failed, 6 work items owed"


@pytest.fixture
def finished(db):
    project = project_get_or_create(name="again")
    for path in ("/d1", "/d2"):
        make_page(project, path, state="done", attempts=1)
    for path in ("/e1", "/e2"):
        make_page(project, path, state="failed", error_code="http_500", attempts=3)
    make_page(project, "/gone", state="failed", error_code="http_404", attempts=1)
    make_page(project, "/b", state="failed", error_code="http_404", host="b.test", attempts=1)
    make_page(project, "/pending", state="fetched")
    return project


def states(project: Project) -> dict[str, str]:
    return dict(Page.objects.filter(project=project).values_list("url", "state"))


def test_requeue_retries_failed_pages_of_one_error_code(finished):
    out, _ = manage("requeue", "again", "--failed", "--error-code", "http_500")
    assert out.strip() == "again: requeued 2 failed pages"
    requeued = Page.objects.filter(project=finished, url__in=["http://a.test/e1", "http://a.test/e2"])
    assert set(requeued.values_list("state", "attempts", "error_code")) == {("queued", 0, "")}
    assert states(finished)["http://a.test/gone"] == "failed"


def test_requeue_narrows_by_host_and_url_regex_and_defaults_to_failed(finished):
    assert manage("requeue", "again", "--host", "B.test")[0].strip() == "again: requeued 1 failed pages"
    assert states(finished)["http://b.test/b"] == "queued"
    assert manage("requeue", "again", "--url-regex", "/e[0-9]$")[0].strip() == "again: requeued 2 failed pages"
    assert states(finished)["http://a.test/gone"] == "failed"
    with pytest.raises(CommandError, match="bad --url-regex"):
        manage("requeue", "again", "--url-regex", "(")


def test_requeue_state_done_refetches_finished_pages_only(finished):
    out, _ = manage("requeue", "again", "--state", "done")
    assert out.strip() == "again: requeued 2 done pages"
    after = states(finished)
    assert (after["http://a.test/d1"], after["http://a.test/d2"]) == ("queued", "queued")
    assert after["http://a.test/e1"] == "failed" and after["http://a.test/pending"] == "fetched"
    with pytest.raises(CommandError):
        manage("requeue", "again", "--failed", "--state", "done")


@pytest.mark.django_db
def test_sinks_prints_a_sinks_secrets_masked_as_the_api_does():
    """Issue 47, point 4: the signing secret is write-only in the command's output too."""
    from sinks.models import Sink

    project = project_get_or_create(name="sinkshow")
    config = {"url": "https://hook:pw-s3cret@receiver.test/hook/path-s3cret", "secret": "signing-s3cret" * 3}
    Sink.objects.create(project=project, name="hook", kind="http", config=config)
    out = io.StringIO()
    call_command("sinks", "sinkshow", stdout=out)
    assert '"secret": "***"' in out.getvalue() and "https://hook:***@receiver.test/***" in out.getvalue()
    assert "s3cret" not in out.getvalue()
