"""Retention: rows older than their setting are pruned a small batch at a time by the control
queue's prune task; recent rows, running jobs, each page's newest version and owed sink records stay."""

from datetime import timedelta

import pytest
from django.apps import apps
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from console.exports.retention import RULES, prune
from console.models import Alert, DebugRun, Job, JobLogEntry, Monitor
from core.canonical import url_key
from crawl.models import Page, PageVersion, Project
from crawlproject.control_tasks import TASK_ROUTES
from crawlproject.queues import CONTROL
from sinks.models import Sink, SinkDelivery

pytestmark = pytest.mark.django_db
LONG_AGO = timedelta(days=400)  # older than every default
RECENTLY = timedelta(hours=1)


def job(project: Project, age: timedelta, state: str = "succeeded") -> Job:
    finished = timezone.now() - age
    return Job.objects.create(project=project, state=state, trigger="admin", created_at=finished, finished_at=finished)


def versions(page: Page, ages: list[timedelta]) -> list[int]:
    now = timezone.now()
    made = [
        PageVersion.objects.create(page=page, fetched_at=now - age, content_sha256="0", text_hash=str(age))
        for age in ages
    ]
    return [v.id for v in made]


def deliveries(sink: Sink, state: str, age: timedelta, n: int) -> list[int]:
    start = SinkDelivery.objects.count()
    rows = SinkDelivery.objects.bulk_create(
        [SinkDelivery(sink=sink, key=f"{state}-{age}-{start + i}", record={}, state=state) for i in range(n)]
    )
    ids = [r.id for r in rows]
    SinkDelivery.objects.filter(id__in=ids).update(updated_at=timezone.now() - age)  # update() skips auto_now
    return ids


@pytest.fixture
def rows():
    project = Project.objects.create(name="kept", slug="kept")
    old_jobs = [job(project, LONG_AGO) for _ in range(5)]
    running = job(project, LONG_AGO, state="running")
    current = job(project, LONG_AGO)
    Project.objects.filter(id=project.id).update(job_id=current.id)  # the project's own job stays
    recent_jobs = [job(project, RECENTLY) for _ in range(2)]
    log_job = recent_jobs[0]
    now = timezone.now()
    old_logs = JobLogEntry.objects.bulk_create(
        [JobLogEntry(job=log_job, at=now - LONG_AGO, level="ERROR", message=f"old {i}") for i in range(5)]
    )
    recent_log = JobLogEntry.objects.create(job=log_job, at=now - RECENTLY, level="ERROR", message="recent")
    url = "http://kept.test/a"
    page = Page.objects.create(project=project, url=url, url_key=url_key(url), host="kept.test")
    url = "http://kept.test/b"
    quiet = Page.objects.create(project=project, url=url, url_key=url_key(url), host="kept.test")
    superseded = versions(page, [LONG_AGO + timedelta(days=i) for i in range(5, 0, -1)])
    newest_of_page = versions(page, [LONG_AGO])  # old, but the page's newest: its current content
    recent_version = versions(quiet, [LONG_AGO, RECENTLY])
    sink = Sink.objects.create(project=project, name="s", kind="file")
    monitor = Monitor.objects.create(project=project, kind=Monitor.Kind.SITE_DOWN)

    def alert(subject: str, resolved) -> int:
        return Alert.objects.create(project=project, monitor=monitor, subject=subject, resolved_at=resolved).id

    def debug_run(age: timedelta) -> int:
        return DebugRun.objects.create(project=project, source="x = 1", created_at=now - age).id

    return {
        "old_debug_runs": [debug_run(timedelta(days=1, minutes=i + 1)) for i in range(5)],
        "kept_debug_runs": [debug_run(timedelta(hours=23))],
        "old_alerts": [alert(f"old {i}", now - LONG_AGO) for i in range(5)],
        "kept_alerts": [alert("still open", None), alert("recent", now - RECENTLY)],
        "old_jobs": [j.id for j in old_jobs],
        "kept_jobs": sorted([running.id, current.id] + [j.id for j in recent_jobs]),
        "old_logs": [e.id for e in old_logs],
        "kept_logs": [recent_log.id],
        "superseded": superseded + recent_version[:1],
        "kept_versions": sorted(newest_of_page + recent_version[1:]),
        "delivered": deliveries(sink, "done", LONG_AGO, 5),
        "kept_deliveries": sorted(
            deliveries(sink, "pending", LONG_AGO, 1)
            + deliveries(sink, "failed", LONG_AGO, 1)
            + deliveries(sink, "done", RECENTLY, 2)
        ),
    }


def test_old_rows_are_pruned_in_small_batches_and_recent_ones_kept(rows):
    first = prune(batch=2, max_batches=2)
    assert first == {
        "console.JobLogEntry": 4,
        "console.Job": 4,
        "crawl.PageVersion": 4,
        "sinks.SinkDelivery": 4,
        "console.Alert": 4,
        "console.DebugRun": 4,
    }, "at most two statements of two rows per kind and run"
    runs = [first]
    while any(runs[-1].values()):
        runs.append(prune(batch=2, max_batches=2))
    assert len(runs) == 3
    assert sorted(Job.objects.values_list("id", flat=True)) == rows["kept_jobs"]
    assert list(JobLogEntry.objects.values_list("id", flat=True)) == rows["kept_logs"]
    assert sorted(PageVersion.objects.values_list("id", flat=True)) == rows["kept_versions"]
    assert sorted(SinkDelivery.objects.values_list("id", flat=True)) == rows["kept_deliveries"]
    assert sum(run["sinks.SinkDelivery"] for run in runs) == len(rows["delivered"])
    assert sum(run["crawl.PageVersion"] for run in runs) == len(rows["superseded"])
    assert sorted(Alert.objects.values_list("id", flat=True)) == rows["kept_alerts"]
    assert list(DebugRun.objects.values_list("id", flat=True)) == rows["kept_debug_runs"]


def test_the_debuggers_runs_are_pruned_after_a_day(rows):
    assert settings.CONSOLE_KEEP_DEBUG_RUNS_DAYS == 1
    assert prune()["console.DebugRun"] == len(rows["old_debug_runs"])
    assert list(DebugRun.objects.values_list("id", flat=True)) == rows["kept_debug_runs"]


def test_a_setting_of_zero_keeps_those_rows_forever(rows):
    with override_settings(CONSOLE_KEEP_SINK_RECORDS_DAYS=0, CONSOLE_KEEP_PAGE_VERSIONS_DAYS=0):
        pruned = prune()
    assert set(pruned) == {"console.JobLogEntry", "console.Job", "console.Alert", "console.DebugRun"}
    assert SinkDelivery.objects.count() == len(rows["delivered"]) + len(rows["kept_deliveries"])
    assert PageVersion.objects.count() == len(rows["superseded"]) + len(rows["kept_versions"])


def test_every_rule_names_a_model_its_date_and_a_setting():
    for rule in RULES:
        model = apps.get_model(rule.model)
        assert model._meta.get_field(rule.date_field).get_internal_type() == "DateTimeField", rule
        assert isinstance(getattr(settings, rule.setting), int), rule


def test_beat_prunes_on_the_control_queue():
    (entry,) = [e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == "console.prune"]
    assert entry["options"]["expires"] <= entry["schedule"]
    assert TASK_ROUTES["console.prune"] == {"queue": CONTROL}
