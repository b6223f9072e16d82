"""The politeness planner on the real database: slots, shared in-flight capacity, token bucket."""

import uuid
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from crawl.models import Host, HostLease
from crawl.services.politeness import GRANT_AHEAD_SECONDS, host_back_off, hosts_grant, hosts_release
from crawl.services.projects import project_get_or_create


@pytest.fixture
def project(db):
    return project_get_or_create(name="plan", max_per_host=2)


def grant(project, n=5, delay=0.0):
    """What one claim wanting n pages of h.test may send; `delay`: the host's known Crawl-delay
    (None: its robots.txt not read yet)."""
    Host.objects.update_or_create(host="h.test", defaults={"crawl_delay": delay})
    with transaction.atomic():
        wanted, projects = {("h.test", project.id): n}, {project.id: project}
        grants = hosts_grant(wanted=wanted, projects=projects, token=uuid.uuid4(), ahead=GRANT_AHEAD_SECONDS)
    return grants[("h.test", project.id)]


def test_it_shares_a_hosts_in_flight_capacity_between_batches(project):
    first = grant(project)
    second = grant(project)
    assert (first.granted, first.in_flight) == (5, 2)
    assert (second.granted, second.later) == (0, None), "the first batch holds both connections: these stay due"
    hosts_release(HostLease.objects.get().token)
    assert grant(project).in_flight == 2


def test_it_forgets_the_capacity_of_a_batch_whose_worker_died(project):
    grant(project)
    HostLease.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert grant(project).in_flight == 2


def test_it_spaces_requests_by_the_crawl_delay_across_claims(project):
    first = grant(project, n=3, delay=2.0)
    hosts_release(HostLease.objects.get().token)
    second = grant(project, n=3, delay=2.0)
    assert first.spacing >= 2.0
    assert first.granted == 1, "one request per slot, and a slot is 2 s: the others wait in the database"
    assert first.waits(2) == [first.later, first.later + timedelta(seconds=first.spacing)]
    assert first.later.timestamp() >= first.slot(0) + first.spacing
    assert second.granted == 0, "the next slot is 2 s away: nobody waits for it"
    assert second.later >= first.waits(2)[-1] + timedelta(seconds=first.spacing), "queued behind the first's"


def test_a_host_whose_robots_txt_is_unread_gets_one_request(project):
    first = grant(project, n=4, delay=None)
    assert first.granted == 1
    assert first.later >= timezone.now() + timedelta(seconds=0.9)


def test_it_holds_a_backed_off_host_for_every_batch(project):
    until = host_back_off(host="h.test", seconds=3600, status=429)
    held = grant(project)
    assert (held.granted, held.later) == (0, until)


def test_it_refuses_a_blocked_host(project):
    Host.objects.create(host="h.test", blocked=True, blocked_reason="abuse desk asked")
    assert grant(project).refused == "abuse desk asked"


def test_it_pays_requests_from_the_projects_token_bucket(project):
    project.rate_limit, project.rate_burst, project.max_per_host = 1.0, 3, 10
    project.save()
    first = grant(project, n=5)
    assert first.granted == 3, "a full bucket pays for the burst"
    assert first.later >= timezone.now() + timedelta(seconds=1.5)
    assert grant(project, n=5).granted == 0, "the bucket is empty until it refills"
