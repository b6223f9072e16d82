"""Frontier rows on the real PostgreSQL: dedupe, compare-and-set claims, zombie writes, the reaper."""

import base64
import json
import os
import threading
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count
from django.utils import timezone

from crawl.frontier.assets import pages_waiting_complete
from crawl.frontier.discovery import pages_discover
from crawl.frontier.pages import pages_claim_for_fetch, pages_finish, pages_ready
from crawl.frontier.reaper import reap
from crawl.frontier.stages import FETCH
from crawl.frontier.verdicts import Fetched, Link
from crawl.models import HostLease, MediaAsset, Page, PageAsset, Project, Seed, StageWakeup
from crawl.policy import project_media_rules, project_scope
from crawl.services.projects import project_get_or_create, seeds_add


@pytest.fixture
def project(make_project):
    project = make_project(name="frontier", allow_private=True)
    seeds_add(project=project, urls=["http://site.test/"])
    return project


def urls(n, host="site.test"):
    return [f"http://{host}/p{i}.html" for i in range(n)]


def discover(project, urls: list[str], depth: int = 1) -> list[int]:
    """Links found at one depth join the frontier; the ids of the new rows."""
    return pages_discover(project=project, links=[Link(u, depth) for u in urls])


def test_it_inserts_each_canonical_url_once_and_returns_only_new_rows(project):
    first = discover(project, urls(5))
    again = discover(project, ["HTTP://SITE.test:80/p1.html#x", "http://site.test/p9.html?utm_source=a"])
    assert len(first) == 5
    assert Page.objects.filter(id__in=again).get().url == "http://site.test/p9.html"
    assert Page.objects.filter(project=project).count() == 1 + 5 + 1


def test_an_edit_anywhere_is_seen_at_the_next_batch_by_every_derived_setting(project):
    """Scope and media rules are kept per process until the project's change stamp moves: a save of
    its settings (admin, API, command) or a change of its seeds moves it; the counters the pipeline
    writes do not."""
    Seed.objects.filter(project=project).delete()
    seeds_add(project=project, urls=["https://a.test/"])
    batch = Project.objects.get(id=project.id)  # what a stage's claim reads
    assert project_scope(batch).domains == ("a.test",)
    assert "image" in project_media_rules(batch).kinds

    stamp = batch.config_changed_at
    Project.objects.get(id=project.id).save(update_fields=["page_count"])
    assert Project.objects.get(id=project.id).config_changed_at == stamp, "bookkeeping is no change"

    edited = Project.objects.get(id=project.id)  # the admin's form saves a copy of its own
    edited.media_kinds = "video"
    edited.save()
    Seed.objects.create(project=project, url="https://b.test/")
    batch = Project.objects.get(id=project.id)
    assert project_scope(batch).domains == ("a.test", "b.test")
    assert project_media_rules(batch).kinds == frozenset({"video"})

    Seed.objects.get(project=project, url="https://b.test/").delete()
    assert project_scope(Project.objects.get(id=project.id)).domains == ("a.test",)


def test_it_keeps_out_of_scope_urls_out_of_the_frontier(project):
    project.max_depth = 2
    project.deny_patterns = r"/private/"
    project.save()
    new = discover(
        project, ["http://other.test/a", "http://sub.site.test/a", "http://site.test/private/x", "mailto:a@b.c"], 2
    )
    assert [p.url for p in Page.objects.filter(id__in=new)] == ["http://sub.site.test/a"]
    assert discover(project, ["http://site.test/deep"], 3) == []


def test_a_projects_links_to_other_ports_of_its_seeds_host_stay_out_unless_the_host_is_named(db):
    project = project_get_or_create(name="ports", allow_private=True)
    seeds_add(project=project, urls=["http://127.0.0.1:19002/"])
    new = discover(project, ["http://127.0.0.1:19002/a", "http://127.0.0.1:8000/admin/"])
    assert [p.url for p in Page.objects.filter(id__in=new)] == ["http://127.0.0.1:19002/a"]
    project.allowed_domains = "127.0.0.1"
    project.save()
    assert len(discover(project, ["http://127.0.0.1:8000/admin/"])) == 1, "a named host: every port of it"


def test_it_stops_discovering_at_max_pages(project):
    project.max_pages = 10
    project.save()
    discover(project, urls(50))
    assert Page.objects.filter(project=project).count() == 10


@pytest.mark.django_db(transaction=True)
def test_it_never_gives_one_page_to_two_concurrent_claimers():
    project = project_get_or_create(name="race", allow_private=True)
    seeds_add(project=project, urls=["http://site.test/"])
    ids = discover(project, urls(300))
    claimed, barrier = [], threading.Barrier(6)

    def claimer():
        barrier.wait()
        _, pages = pages_claim_for_fetch(ids)
        claimed.append({p.id for p in pages})
        connection.close()

    threads = [threading.Thread(target=claimer) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(len(c) for c in claimed) == len(ids)
    assert set().union(*claimed) == set(ids)


def test_it_rejects_the_late_write_of_a_worker_whose_lease_expired(project):
    ids = discover(project, urls(3))
    slow_token, _ = pages_claim_for_fetch(ids)
    Page.objects.filter(id__in=ids).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert pages_claim_for_fetch(ids)[1] == [], "an expired lease goes back through the reaper"
    reap(project_id=project.id)
    fast_token, pages = pages_claim_for_fetch(ids)
    assert len(pages) == 3
    first = [p for p in pages if p.id == ids[0]]
    assert pages_finish(token=slow_token, stage=FETCH, verdicts=[(first[0], Fetched())]) == set()
    assert Page.objects.get(id=ids[0]).attempts == 1, "the dead batch's attempt was given back"
    assert pages_finish(token=fast_token, stage=FETCH, verdicts=[(first[0], Fetched())]) == {ids[0]}
    assert Page.objects.get(id=ids[0]).state == "fetched"


def test_it_fails_a_page_that_keeps_killing_its_worker_alone_and_spares_its_batch_mates(project, broker):
    ids = discover(project, urls(3))
    pages_claim_for_fetch(ids[:2])  # a batch of two dies together: neither is charged
    pages_claim_for_fetch(ids[2:])  # a page that died alone, for the last time
    Page.objects.filter(id=ids[2]).update(attempts=settings.CRAWL_MAX_ATTEMPTS)
    Page.objects.filter(id__in=ids).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    report = reap(project_id=project.id)
    assert (report.leases_expired, report.leases_failed) == (2, 1)
    assert Page.objects.get(id=ids[2]).error_code == "lease_expired"
    rows = Page.objects.filter(id__in=ids[:2])
    assert {(p.state, p.attempts, p.lease_token) for p in rows} == {("queued", 0, None)}


@pytest.mark.django_db(transaction=True)
def test_it_wakes_the_fetch_stage_once_when_due_work_has_no_message(broker):
    project = project_get_or_create(name="lost", allow_private=True)
    seeds_add(project=project, urls=["http://site.test/"])
    discover(project, urls(4))
    redis.Redis.from_url(broker).flushdb()
    StageWakeup.objects.all().delete()
    reap(project_id=project.id)
    assert _messages(broker, "fetch") == [[]], "one wake-up, which carries no ids: the rows are the queue"
    reap(project_id=project.id)
    assert len(_messages(broker, "fetch")) == 1, "a wake-up on its way is not sent twice"
    StageWakeup.objects.update(due_at=timezone.now() - timedelta(minutes=1))
    reap(project_id=project.id)
    assert len(_messages(broker, "fetch")) == 2, "a wake-up long overdue counts as lost"


@pytest.mark.django_db(transaction=True)
def test_pages_a_dead_worker_held_with_others_go_back_one_per_message(broker):
    project = project_get_or_create(name="dead", allow_private=True)
    seeds_add(project=project, urls=["http://site.test/"])
    ids = discover(project, urls(3))
    _, claimed = pages_claim_for_fetch(ids)
    Page.objects.filter(id__in=ids).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    redis.Redis.from_url(broker).flushdb()
    reap(project_id=project.id)
    assert sorted(_messages(broker, "fetch")) == sorted([[i] for i in ids])
    assert set(Page.objects.filter(id__in=ids).values_list("suspect", flat=True)) == {True}
    with transaction.atomic():
        ready = pages_ready(limit=50, render=False, due=timezone.now())
    assert ready == [(p.id, project.id, "site.test") for p in Page.objects.filter(project=project, suspect=False)], (
        "a suspect is never claimed with others"
    )
    assert len(claimed) == 3


def _messages(broker_url: str, queue: str) -> list[list[int]]:
    """The page ids of each message waiting in a Redis queue (Celery protocol 2, JSON body)."""
    return [
        json.loads(base64.b64decode(json.loads(raw)["body"]))[0][0]
        for raw in redis.Redis.from_url(broker_url).lrange(queue, 0, -1)
    ]


def test_it_marks_a_page_done_only_when_its_media_is_no_longer_pending(project):
    page = Page.objects.get(project=project)
    Page.objects.filter(id=page.id).update(state="extracted")
    asset = MediaAsset.objects.create(project=project, url="http://site.test/a.jpg", url_key="k" * 64)
    PageAsset.objects.create(page=page, asset=asset)
    assert pages_waiting_complete(asset_ids=[asset.id]) == 0
    MediaAsset.objects.filter(id=asset.id).update(state="done")
    assert pages_waiting_complete(asset_ids=[asset.id]) == 1
    assert Page.objects.get(id=page.id).state == "done"


def test_it_gives_each_host_its_own_page_budget(project):
    project.max_pages_per_host = 3
    project.save()
    discover(project, urls(10) + urls(10, host="sub.site.test"))
    per_host = dict(Page.objects.filter(project=project).values_list("host").annotate(n=Count("id")))
    assert per_host == {"site.test": 3, "sub.site.test": 3}


def test_it_refuses_seeds_with_a_clear_reason():
    from crawl.services.projects import seed_problem

    assert seed_problem("ftp://example.com/x", allow_private=False).startswith("blocked_scheme")
    assert seed_problem("http//nope", allow_private=False).startswith("invalid_url")
    assert "non-public address" in seed_problem("http://127.0.0.1:8001/", allow_private=False)
    assert "non-public address" in seed_problem("http://localhost/", allow_private=False)
    assert seed_problem("http://127.0.0.1:8001/", allow_private=True) is None
    assert "own servers" in seed_problem("http://127.0.0.1:8000/", allow_private=True), "the console's address"
    assert "metadata" in seed_problem("http://169.254.169.254/latest/", allow_private=True)


@pytest.mark.django_db(transaction=True)
def test_the_reaper_keeps_the_frontier_statistics_fresh_as_it_grows():
    """Stale statistics made the planner scan a whole project for a claim of 50 ids."""
    from crawl.frontier.upkeep import tables_upkeep

    project = project_get_or_create(name="grows", allow_private=True)
    seeds_add(project=project, urls=["http://site.test/"])
    discover(project, urls(3000))
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")  # this backend's counts, visible now
    done = tables_upkeep()
    assert {"ANALYZE crawl_page", "VACUUM (ANALYZE) crawl_page"} & set(done), done
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'crawl_page'")
        assert cursor.fetchone()[0] >= 3000, "the planner now knows the table's size"
        cursor.execute("SELECT pg_stat_force_next_flush()")
    assert not any("crawl_page" in done for done in tables_upkeep()), "nothing to do until a tenth changes"


@pytest.mark.django_db(transaction=True)
def test_a_table_analyzed_moments_ago_is_done_again_only_once_it_has_doubled():
    """A fast crawl rewrites a tenth of its pages every few seconds; the statistics are taken again
    within the spacing only when the table doubled (the case that misleads the planner)."""
    from crawl.frontier.upkeep import tables_upkeep

    def upkeep_of_pages() -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_force_next_flush()")
        return [done for done in tables_upkeep() if done.endswith("crawl_page")]

    project = project_get_or_create(name="churns", allow_private=True)
    discover(project, urls(3000))
    assert upkeep_of_pages()
    Page.objects.filter(project=project).update(priority=1)  # every row changed, none added
    assert upkeep_of_pages() == [], "analyzed moments ago, same size"
    discover(project, urls(7000, host="more.test"))
    assert upkeep_of_pages(), "more than doubled: taken again at once"


def test_the_reaper_hands_back_at_once_what_a_gone_worker_holds(project):
    """Leases are long (a batch may take minutes); a worker whose heartbeats stopped, or that started
    again under the same name, holds nothing: its claims go back at the next sweep."""
    from console.models import WorkerBeat

    now = timezone.now()
    WorkerBeat.objects.create(name="dead@h", queues="fetch", seen_at=now - timedelta(minutes=5))
    WorkerBeat.objects.create(name="restarted@h", queues="fetch", started_at=now, seen_at=now)
    WorkerBeat.objects.create(name="alive@h", queues="fetch", started_at=now - timedelta(hours=1), seen_at=now)
    ids = discover(project, urls(3))
    for page_id, worker in zip(ids, ("dead@h", "restarted@h", "alive@h"), strict=True):
        _, claimed = pages_claim_for_fetch([page_id], worker=worker)
        assert [p.id for p in claimed] == [page_id]
    Page.objects.filter(id=ids[1]).update(lease_expires_at=now + timedelta(seconds=settings.CRAWL_LEASE_SECONDS - 5))
    tokens = dict(Page.objects.filter(id__in=ids).values_list("id", "lease_token"))
    hour = now + timedelta(hours=1)
    for page_id in (ids[0], ids[2]):  # the hosts' in-flight capacity their claims booked
        HostLease.objects.create(host="example.com", token=tokens[page_id], slots=1, expires_at=hour)
    report = reap(project_id=project.id)
    assert report.leases_abandoned == 2
    live = set(HostLease.objects.filter(expires_at__gt=timezone.now()).values_list("token", flat=True))
    assert live == {tokens[ids[2]]}, "the dead worker's host capacity is free again, the live one's held"
    states = dict(Page.objects.filter(id__in=ids).values_list("fetched_by", "state"))
    me = os.getpid()
    assert states == {f"dead@h#{me}": "queued", f"restarted@h#{me}": "queued", f"alive@h#{me}": "leased"}


def test_the_reaper_hands_back_at_once_what_a_gone_pool_process_holds(project):
    """A pool process killed alone (the kernel's OOM killer) leaves its worker beating: what it
    holds goes back once a heartbeat no longer lists it, and only what it claimed before then."""
    from console.models import WorkerBeat

    now, me = timezone.now(), os.getpid()
    hour_ago = now - timedelta(hours=1)
    WorkerBeat.objects.create(name="oom@h", queues="fetch", started_at=hour_ago, seen_at=now, processes="1,2")
    WorkerBeat.objects.create(name="kept@h", queues="fetch", started_at=hour_ago, seen_at=now, processes=f"1,{me}")
    WorkerBeat.objects.create(name="unlisted@h", queues="fetch", started_at=hour_ago, seen_at=now, processes="")
    ids = discover(project, urls(4))
    for page_id, worker in zip(ids, ("oom@h", "kept@h", "unlisted@h", "oom@h"), strict=True):
        _, claimed = pages_claim_for_fetch([page_id], worker=worker)
        assert [p.id for p in claimed] == [page_id]
    beat = timezone.now()  # the worker's next heartbeat, after those claims
    WorkerBeat.objects.update(seen_at=beat)
    later = beat + timedelta(seconds=settings.CRAWL_LEASE_SECONDS + 5)
    Page.objects.filter(id=ids[3]).update(lease_expires_at=later)
    report = reap(project_id=project.id)
    assert report.leases_abandoned == 1, "the process's claim made after the heartbeat stays (not seen yet)"
    assert dict(Page.objects.filter(id__in=ids).values_list("id", "state")) == {
        ids[0]: "queued",
        ids[1]: "leased",
        ids[2]: "leased",
        ids[3]: "leased",
    }


def test_a_hub_is_never_given_up_for_a_transient_failure_but_a_new_page_is(project, settings):
    """After the short schedule's attempts a seed of a project that recrawls on a schedule (and a
    page fetched before) waits on the long schedule; a page never fetched fails, as before."""
    from crawl.frontier.verdicts import Retry

    settings.CRAWL_RETRY_LONG_SECONDS, settings.CRAWL_RETRY_MAX_SECONDS = 300.0, 3600.0
    project.recrawl_every_minutes = 60  # an always-on project: its hubs are monitored
    project.save()
    seed = Page.objects.get(project=project, is_seed=True)
    (new,) = discover(project, urls(1))
    (fetched_before,) = discover(project, urls(1, host="sub.site.test"))
    Page.objects.filter(id=fetched_before).update(fetch_count=4, content_sha256="a" * 64)
    ids = [seed.id, new, fetched_before]
    Page.objects.filter(id__in=ids).update(attempts=settings.CRAWL_MAX_ATTEMPTS - 1)
    for extra in range(3):
        token, claimed = pages_claim_for_fetch([i for i in ids if Page.objects.get(id=i).state == "queued"])
        before = timezone.now()
        pages_finish(token=token, stage=FETCH, verdicts=[(p, Retry("connect_error", "refused")) for p in claimed])
        waits = {p.id: (p.next_fetch_at - before).total_seconds() for p in Page.objects.filter(id__in=ids)}
        assert Page.objects.get(id=new).state == "failed"
        for kept in (seed.id, fetched_before):
            assert Page.objects.get(id=kept).state == "queued", "a hub down for a while is looked at again"
            assert min(3600, 300 * 2**extra) - 1 <= waits[kept] <= min(3600, 300 * 2**extra) + 1
        Page.objects.filter(id__in=ids, state="queued").update(next_fetch_at=timezone.now())


def test_a_project_far_ahead_of_its_extraction_fetches_nothing_more_until_it_catches_up(project, settings, monkeypatch):
    """Its fetched pages wait in few extract messages, so another project's page is extracted soon."""
    from crawl.frontier import pages as frontier_pages
    from crawl.frontier.pages import EXTRACT_BACKLOG, backlog_recount

    monkeypatch.setattr(frontier_pages, "BACKLOG_SECONDS", 3600)  # a slow machine must not recount by itself
    settings.CRAWL_EXTRACT_BATCH = 2
    other = project_get_or_create(name="other", allow_private=True)
    seeds_add(project=other, urls=["http://other.test/"])
    fetched = discover(project, urls(EXTRACT_BACKLOG * 2 + 1))
    Page.objects.filter(id__in=fetched).update(state="fetched")
    backlog_recount()  # a process counts the backlogs at most once a BACKLOG_SECONDS
    with transaction.atomic():
        ready = {project_id for _, project_id, _ in pages_ready(limit=50, render=False, due=timezone.now())}
    assert ready == {other.id}, "the seed of the backlogged project waits"
    Page.objects.filter(id=fetched[0]).update(state="done")
    with transaction.atomic():
        ready = {project_id for _, project_id, _ in pages_ready(limit=50, render=False, due=timezone.now())}
    assert ready == {other.id}, "the count is kept for BACKLOG_SECONDS: still paused"
    backlog_recount()
    with transaction.atomic():
        ready = {project_id for _, project_id, _ in pages_ready(limit=50, render=False, due=timezone.now())}
    assert ready == {project.id, other.id}


def test_a_task_that_failed_gives_its_leases_up_before_the_next_one(project):
    """A task that fails (the database restarted under it) leaves its process alive, so no heartbeat
    says its claims are abandoned: the process expires them itself when its next task starts, and
    the reaper hands them back then, not a lease later."""
    from crawl.frontier.leases import leases_task_ended, leases_task_started

    ids = discover(project, urls(3))
    leases_task_started()
    token, claimed = pages_claim_for_fetch(ids[:2], worker="fetch@h")
    HostLease.objects.create(host="example.com", token=token, slots=1, expires_at=timezone.now() + timedelta(hours=1))
    leases_task_ended(state="FAILURE")
    leases_task_started()
    _, kept = pages_claim_for_fetch(ids[2:], worker="fetch@h")
    leases_task_ended(state="SUCCESS")
    leases_task_started()
    leases_task_ended(state="SUCCESS")
    report = reap(project_id=project.id)
    assert len(claimed) == 2 and len(kept) == 1
    assert report.leases_expired == 2, "the failed task's two rows come back; the succeeded one's claim stays"
    assert dict(Page.objects.filter(id__in=ids).values_list("id", "state")) == {
        ids[0]: "queued",
        ids[1]: "queued",
        ids[2]: "leased",
    }
    assert not HostLease.objects.filter(token=token, expires_at__gt=timezone.now()).exists()
