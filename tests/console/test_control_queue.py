"""Issue 48, point 1: a worker started without the control queue. Every worker consumes `control`
whatever its -Q says (`-X control` leaves it out, and says so in its log), and the overview, the
dashboard, the API's `progress` and the crawl command warn while nobody consumes it, or while no
beat runs and a job is open (even one that owes nothing)."""

import subprocess
import sys

import pytest

from console.dashboard import dashboard_snapshot, overview_snapshot
from console.models import Job, WorkerBeat
from console.runs.beat import scheduler_heartbeat
from console.runs.job_runs import Waiting
from console.runs.workers import scheduler_warnings, stage_warnings
from tests.conftest import BASE_DIR
from tests.helpers import wait_until

NO_CONTROL = "No worker consumes the 'control' queue"
NO_BEAT = "No scheduler (celery beat) is running"


@pytest.fixture
def project(make_project):
    return make_project(name="ctl", allow_private=True)


def celery_worker(args: list[str], env: dict, log) -> subprocess.Popen:
    command = [sys.executable, "-m", "celery", "-A", "crawlproject", "worker", *args, "-c", "1", "-l", "INFO"]
    return subprocess.Popen(command, cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT)


@pytest.mark.integration
def test_1_a_worker_started_without_control_consumes_it_unless_it_is_excluded(broker, worker_env, tmp_path):
    logs = {name: open(tmp_path / f"{name}.log", "w") for name in ("plain", "excluded")}
    plain = celery_worker(["-Q", "fetch", "-n", "plain@%h"], worker_env, logs["plain"])
    excluded = celery_worker(["-Q", "extract", "-X", "control", "-n", "excluded@%h"], worker_env, logs["excluded"])

    def queues_reported() -> dict | None:
        beats = {b.name.split("@")[0]: b.queue_list() for b in WorkerBeat.objects.all()}
        return beats if set(beats) == set(logs) else None

    def logged() -> str:
        return "both workers' heartbeats:\n" + "".join((tmp_path / f"{n}.log").read_text() for n in logs)

    try:
        beats = wait_until(queues_reported, timeout=60, what=logged)
    finally:
        for proc in (plain, excluded):
            proc.terminate()
            proc.wait(30)
    assert beats == {"plain": ["control", "fetch"], "excluded": ["extract"]}
    plain_log, excluded_log = ((tmp_path / f"{n}.log").read_text() for n in logs)
    assert "this worker consumes the 'control' queue too" in plain_log
    assert "does not consume the 'control' queue (-X control): another worker must" in excluded_log


def test_1_every_surface_warns_while_nobody_consumes_control_and_a_job_owes_nothing(project, admin_client):
    WorkerBeat.objects.create(name="fetch@old", queues="fetch")  # a worker of the old habit: -X control
    WorkerBeat.objects.create(name="extract@old", queues="extract,download")
    job = Job.objects.create(project=project, state=Job.State.RUNNING, trigger=Job.Trigger.API)
    project.job_id = job.id
    project.save(update_fields=["job_id"])

    overview = overview_snapshot()["warnings"]
    dashboard = dashboard_snapshot(project)["warnings"]
    progress = admin_client.get(f"/api/projects/{project.slug}/progress/").json()["warnings"]
    for warnings in (overview, dashboard, progress):
        assert any(NO_CONTROL in w and "-X control" in w for w in warnings), warnings
        assert any(NO_BEAT in w for w in warnings), "a job is open: beat must end it, though nothing is owed"
    assert NO_CONTROL in admin_client.get("/admin/").content.decode().replace("&#x27;", "'")
    assert "control" in dashboard_snapshot(project)["queues"], "the broker table has a control row"

    notices = []
    Waiting(project, None, notice=notices.append, on_progress=None, every=1)._warn_unworked()
    assert any(NO_CONTROL in n for n in notices), "the crawl command says so too"

    WorkerBeat.objects.create(name="housekeeping@new", queues="control,fetch")
    scheduler_heartbeat()
    assert overview_snapshot()["warnings"] == [] and dashboard_snapshot(project)["warnings"] == []
    job.state = Job.State.PAUSED
    job.save()
    WorkerBeat.objects.all().delete()
    assert overview_snapshot()["warnings"] == [], "no worker, no open job: nothing to warn about"


def test_2_the_hint_for_a_stage_nobody_consumes_names_a_command_that_works_here(db, settings):
    settings.CELERY_EMBEDDED_BROKER = False  # distributed: `manage.py serve` starts no worker there
    (hint,) = stage_warnings({"fetch": 3})
    assert "`make worker-fetch`" in hint and "`.venv/bin/celery -A crawlproject worker -Q fetch,control`" in hint
    assert "make serve" not in hint and "-Q fetch`" not in hint, "a worker without control teaches the habit"
    (beat,) = scheduler_warnings(3)
    assert "`make beat`" in beat and "make serve" not in beat
    settings.CELERY_EMBEDDED_BROKER = True
    assert "`make serve`" in stage_warnings({"extract": 1})[0] and "`make serve`" in scheduler_warnings(1)[0]
