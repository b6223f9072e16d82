"""Frontier rows on the real PostgreSQL: dedupe, compare-and-set claims, zombie writes, the reaper."""

import base64
import json
import threading
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.db import connection
from django.db.models import Count
from django.utils import timezone

from crawl.models import Page
from crawl.services.frontier import pages_claim_for_fetch, pages_discover, pages_finish_many
from crawl.services.projects import project_get_or_create, seeds_add
from crawl.services.reaper import reap
from media.models import MediaAsset, PageAsset
from media.services import pages_complete


@pytest.fixture
def project(db):
    project = project_get_or_create(name="frontier", allow_private=True)
    seeds_add(project=project, urls=["http://site.test/"])
    return project


def urls(n, host="site.test"):
    return [f"http://{host}/p{i}.html" for i in range(n)]


def test_it_inserts_each_canonical_url_once_and_returns_only_new_rows(project):
    first = pages_discover(project=project, urls=urls(5), depth=1)
    again = pages_discover(
        project=project, urls=["HTTP://SITE.test:80/p1.html#x", "http://site.test/p9.html?utm_source=a"], depth=1
    )
    assert len(first) == 5
    assert Page.objects.filter(id__in=again).get().url == "http://site.test/p9.html"
    assert Page.objects.filter(project=project).count() == 1 + 5 + 1


def test_it_keeps_out_of_scope_urls_out_of_the_frontier(project):
    project.max_depth = 2
    project.deny_patterns = r"/private/"
    project.save()
    from crawl.services.frontier import forget_scope

    forget_scope(project.id)
    new = pages_discover(
        project=project,
        depth=2,
        urls=["http://other.test/a", "http://sub.site.test/a", "http://site.test/private/x", "mailto:a@b.c"],
    )
    assert [p.url for p in Page.objects.filter(id__in=new)] == ["http://sub.site.test/a"]
    assert pages_discover(project=project, urls=["http://site.test/deep"], depth=3) == []


def test_it_stops_discovering_at_max_pages(project):
    project.max_pages = 10
    project.save()
    pages_discover(project=project, urls=urls(50), depth=1)
    assert Page.objects.filter(project=project).count() == 10


@pytest.mark.django_db(transaction=True)
def test_it_never_gives_one_page_to_two_concurrent_claimers():
    project = project_get_or_create(name="race", allow_private=True)
    seeds_add(project=project, urls=["http://site.test/"])
    ids = pages_discover(project=project, urls=urls(300), depth=1)
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
    ids = pages_discover(project=project, urls=urls(3), depth=1)
    slow_token, _ = pages_claim_for_fetch(ids)
    Page.objects.filter(id__in=ids).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    fast_token, pages = pages_claim_for_fetch(ids)
    assert len(pages) == 3
    fetched = {ids[0]: {"state": "fetched"}}
    assert pages_finish_many(token=slow_token, from_state="leased", changes=fetched) == set()
    assert pages_finish_many(token=fast_token, from_state="leased", changes=fetched) == {ids[0]}
    assert Page.objects.get(id=ids[0]).attempts == 2


def test_it_requeues_expired_leases_and_fails_pages_that_keep_killing_workers(project, broker):
    ids = pages_discover(project=project, urls=urls(2), depth=1)
    pages_claim_for_fetch(ids)
    Page.objects.filter(id=ids[0]).update(attempts=settings.CRAWL_MAX_ATTEMPTS)
    Page.objects.filter(id__in=ids).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    report = reap(project_id=project.id)
    assert (report.leases_expired, report.leases_failed) == (1, 1)
    assert Page.objects.get(id=ids[0]).error_code == "lease_expired"
    assert Page.objects.get(id=ids[1]).state == "queued"


def test_it_republishes_queued_work_that_no_message_carries(project, broker):
    ids = pages_discover(project=project, urls=urls(4), depth=1)
    Page.objects.filter(project=project).update(enqueued_at=timezone.now() - timedelta(hours=1))
    report = reap(project_id=project.id)
    published = _published_ids(broker, "fetch")
    assert report.fetch_republished == 5
    assert set(ids) <= published
    assert reap(project_id=project.id).fetch_republished == 0, "fresh messages are not sent twice"


def _published_ids(broker_url: str, queue: str) -> set[int]:
    """Page ids in the batch messages waiting in a Redis queue (Celery protocol 2, JSON body)."""
    ids = set()
    for raw in redis.Redis.from_url(broker_url).lrange(queue, 0, -1):
        args, _kwargs, _embed = json.loads(base64.b64decode(json.loads(raw)["body"]))
        ids.update(args[0])
    return ids


def test_it_marks_a_page_done_only_when_its_media_is_no_longer_pending(project):
    page = Page.objects.get(project=project)
    Page.objects.filter(id=page.id).update(state="extracted")
    asset = MediaAsset.objects.create(project=project, url="http://site.test/a.jpg", url_key="k" * 64)
    PageAsset.objects.create(page=page, asset=asset)
    assert pages_complete(asset_ids=[asset.id]) == 0
    MediaAsset.objects.filter(id=asset.id).update(state="done")
    assert pages_complete(asset_ids=[asset.id]) == 1
    assert Page.objects.get(id=page.id).state == "done"


def test_it_gives_each_host_its_own_page_budget(project):
    project.max_pages_per_host = 3
    project.save()
    pages_discover(project=project, urls=urls(10) + urls(10, host="sub.site.test"), depth=1)
    per_host = dict(Page.objects.filter(project=project).values_list("host").annotate(n=Count("id")))
    assert per_host == {"site.test": 3, "sub.site.test": 3}


def test_it_refuses_seeds_with_a_clear_reason():
    from crawl.services.projects import seed_problem

    assert seed_problem("ftp://example.com/x", allow_private=False).startswith("blocked_scheme")
    assert seed_problem("http//nope", allow_private=False).startswith("invalid_url")
    assert "non-public address" in seed_problem("http://127.0.0.1:8000/", allow_private=False)
    assert "non-public address" in seed_problem("http://localhost/", allow_private=False)
    assert seed_problem("http://127.0.0.1:8000/", allow_private=True) is None
