"""Recrawl and freshness on the real database: revisit arithmetic, the dispatcher's compare-and-set,
beat's PeriodicTask kept in sync from the admin, page versions and their diff, no long countdowns."""

import json
import re
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from console.runs.control import pages_recrawl
from crawl.frontier.discovery import pages_discover
from crawl.frontier.recrawl import pages_dispatch
from crawl.frontier.verdicts import Link
from crawl.models import Page, PageVersion
from crawl.services.freshness import revisit
from crawl.services.projects import project_get_or_create, seeds_add
from fetch.services import pages_fetch
from scrape.services import pages_extract
from tests.servers import Site, SiteServer

HTML = {"Content-Type": "text/html; charset=utf-8"}


@pytest.fixture
def project(make_project):
    return make_project(
        name="fresh", allow_private=True, revisit_min_seconds=60, revisit_max_seconds=3600, hub_revisit_seconds=30
    )


def test_it_halves_the_interval_of_a_changing_page_and_doubles_it_for_a_quiet_one(project):
    page = Page(project=project, url="http://a.test/x", revisit_seconds=400)
    assert revisit(project, page, changed=True) == 200
    assert revisit(project, page, changed=False) == 800
    page.revisit_seconds = 3000
    assert revisit(project, page, changed=False) == 3600, "bounded by the project's maximum"
    page.revisit_seconds = 70
    assert revisit(project, page, changed=True) == 60, "and by its minimum (age)"
    assert revisit(project, Page(project=project, url="http://a.test/", is_seed=True), changed=False) == 30, (
        "hubs keep their short interval"
    )


@pytest.mark.django_db(transaction=True)
def test_two_dispatchers_at_once_never_queue_a_page_twice():
    project = project_get_or_create(name="dispatch", allow_private=True)
    seeds_add(project=project, urls=["http://a.test/"])
    pages_discover(project=project, links=[Link(f"http://a.test/p{i}", 1) for i in range(200)])
    Page.objects.filter(project=project).update(state="done", next_fetch_at=timezone.now() - timedelta(seconds=1))
    queued, barrier = [], threading.Barrier(4)

    def dispatcher():
        barrier.wait()
        queued.append(set(pages_dispatch(project_id=project.id)))
        connection.close()

    threads = [threading.Thread(target=dispatcher) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(len(q) for q in queued) == 201
    assert set().union(*queued) == set(Page.objects.filter(project=project).values_list("id", flat=True))


def admin_post_data(response) -> dict:
    """The change form's current values, as a browser would post them back."""
    data = {}
    form = response.context["adminform"].form
    for name, field in form.fields.items():
        value = form.initial.get(name, field.initial)
        if value is None:
            continue
        data[name] = "on" if value is True else value if not isinstance(value, (dict, list)) else json.dumps(value)
        if value is False:
            data.pop(name)
    for formset in response.context["inline_admin_formsets"]:
        fs = formset.formset
        management = fs.management_form.initial | {"TOTAL_FORMS": fs.management_form.initial["INITIAL_FORMS"]}
        data.update({f"{fs.prefix}-{k}": v for k, v in management.items()})  # no empty extra rows
    return data


def test_editing_the_schedule_in_the_admin_updates_beat_without_a_second_task(admin_client, project):
    url = f"/admin/crawl/project/{project.id}/change/"
    for minutes in ("15", "5"):
        data = admin_post_data(admin_client.get(url)) | {"recrawl_every_minutes": minutes}
        response = admin_client.post(url, data)
        assert response.status_code == 302, response.context["adminform"].form.errors if response.context else ""
    (task,) = PeriodicTask.objects.filter(task="crawl.dispatch")
    tick = min(5 * 60, project.hub_revisit_seconds)  # as often as the hubs are due, when that is sooner
    assert (task.interval.every, task.interval.period, task.kwargs) == (
        tick,
        "seconds",
        f'{{"project_id": {project.id}}}',
    )
    data = admin_post_data(admin_client.get(url)) | {"recrawl_every_minutes": "", "recrawl_crontab": "*/10 * * * *"}
    assert admin_client.post(url, data).status_code == 302
    (task,) = PeriodicTask.objects.filter(task="crawl.dispatch")
    assert (task.interval, task.crontab.minute, str(task.crontab.timezone)) == (None, "*/10", "UTC")
    bad = admin_post_data(admin_client.get(url)) | {"recrawl_crontab": "every ten minutes"}
    assert "5 fields" in str(admin_client.post(url, bad).context["adminform"].form.errors)


def test_real_changes_make_versions_and_a_changed_timestamp_does_not(admin_client, project):
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")

    def publish(text: str):
        body = f"<html><head><title>News</title></head><body><p>{text}</p></body></html>".encode()
        site.files["/news"] = (200, HTML, body)

    with SiteServer(site) as server:
        (page_id,) = seeds_add(project=project, urls=[f"{server.url}/news"])

        def crawl_once():
            pages_recrawl(project=project)
            assert pages_fetch(page_ids=[page_id]) in ([page_id], [])
            pages_extract(page_ids=[page_id])

        for text in (
            "The river rose. Updated 2026-11-22 09:00.",
            "The river rose. Updated 2026-11-22 10:30.",  # only the timestamp changed
            "The river fell. Updated 2026-11-22 11:00.",
            "The river fell. The bridge reopened. Updated 2026-11-22 12:00.",
        ):
            publish(text)
            crawl_once()
    versions = list(PageVersion.objects.filter(page_id=page_id))
    assert len(versions) == 3
    assert Page.objects.get(id=page_id).change_count == 3
    response = admin_client.get(f"/admin/crawl/page/{page_id}/diff/?a={versions[1].id}&b={versions[2].id}")
    html = response.content.decode()
    assert "+The bridge reopened." in html
    assert "-The river rose." not in html and "+The river fell." not in html
    changes = admin_client.get("/api/changes/", {"project": project.slug}).json()["changes"]
    assert len(changes) == 3


def test_only_the_frontier_sets_countdowns_and_they_stay_short():
    """Backoff and revisit times live in the database; the frontier's wake-up messages have short
    countdowns (a long Celery ETA on Redis is delivered twice), and longer waits carry none."""
    from crawl.frontier.wakeups import wakeup_at, wakeups_group

    code = [
        p
        for app in ("crawl", "fetch", "scrape", "media", "crawlproject")
        for p in Path(settings.BASE_DIR, app).rglob("*.py")
    ]
    setting = [p for p in code if re.search(r"\b(countdown|eta)\s*=", p.read_text())]
    offenders = [str(p) for p in setting if "frontier" not in p.parts]
    assert offenders == []
    now, bound = timezone.now(), settings.CRAWL_WAKEUP_MAX_SECONDS
    assert bound < settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout", 1800) / 2
    assert wakeup_at(now + timedelta(seconds=bound), now) is not None
    assert wakeup_at(now + timedelta(seconds=bound + 1), now) is None, "too long for a message: the reaper's"
    groups = wakeups_group([(1, now + timedelta(seconds=2)), (2, now + timedelta(seconds=2.01)), (3, now)], now)
    assert groups == {2.0: [1], 2.1: [2], 0.1: [3]}


def test_a_shorter_hub_interval_reschedules_the_pages_already_waiting(project):
    from crawl.services.recrawl_schedules import task_name

    now = timezone.now()
    fetched = now - timedelta(minutes=10)
    seeds_add(project=project, urls=["http://a.test/"])
    hub = Page.objects.get(project=project, is_seed=True)
    other = Page.objects.create(project=project, url="http://a.test/x", url_key="x" * 64, host="a.test")
    Page.objects.filter(id=hub.id).update(state="done", fetched_at=fetched, next_fetch_at=now + timedelta(hours=1))
    Page.objects.filter(id=other.id).update(
        state="done", fetched_at=fetched, revisit_seconds=7200, next_fetch_at=fetched + timedelta(seconds=7200)
    )
    project.recrawl_every_minutes = 60
    project.save()
    project.hub_revisit_seconds, project.revisit_max_seconds = 60, 1800
    project.save()
    hub.refresh_from_db()
    other.refresh_from_db()
    assert hub.next_fetch_at == fetched + timedelta(seconds=60), "due now, not in an hour"
    assert (other.revisit_seconds, other.next_fetch_at) == (1800, fetched + timedelta(seconds=1800))
    assert set(pages_dispatch(project_id=project.id)) == {hub.id}
    task = PeriodicTask.objects.get(name=task_name(project))
    assert (task.interval.every, task.interval.period) == (60, "seconds"), "the dispatcher ticks as often as hubs"
