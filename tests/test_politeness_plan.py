"""The politeness planner on the real database: slots, shared in-flight capacity, token bucket."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from crawl.models import Host, HostLease
from crawl.services.politeness import host_back_off, hosts_plan, hosts_release
from crawl.services.projects import project_get_or_create


@pytest.fixture
def project(db):
    return project_get_or_create(name="plan", max_per_host=2)


def plan(project, n=5, delay=None):
    return hosts_plan(project=project, wanted={"h.test": n}, crawl_delays={"h.test": delay}, token=uuid.uuid4())


def test_it_shares_a_hosts_in_flight_capacity_between_batches(project):
    first = plan(project)["h.test"]
    second = plan(project)["h.test"]
    assert (first.granted, first.in_flight) == (5, 2)
    assert second.granted == 0, "the first batch holds both connections"
    assert second.retry_at > timezone.now()
    hosts_release(HostLease.objects.get().token)
    assert plan(project)["h.test"].in_flight == 2


def test_it_forgets_the_capacity_of_a_batch_whose_worker_died(project):
    plan(project)
    HostLease.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert plan(project)["h.test"].in_flight == 2


def test_it_spaces_requests_by_the_crawl_delay_across_batches(project):
    first = plan(project, n=3, delay=2.0)["h.test"]
    hosts_release(HostLease.objects.get().token)
    second = plan(project, n=3, delay=2.0)["h.test"]
    assert first.spacing >= 2.0
    last = first.slot(first.granted - 1)
    assert second.slot(0) >= last + first.spacing, "the second batch starts after the first one's slots"


def test_it_holds_a_backed_off_host_for_every_batch(project):
    until = host_back_off(host="h.test", seconds=3600, status=429)
    held = plan(project)["h.test"]
    assert (held.granted, held.retry_at) == (0, until)


def test_it_refuses_a_blocked_host(project):
    Host.objects.create(host="h.test", blocked=True, blocked_reason="abuse desk asked")
    assert plan(project)["h.test"].refused == "abuse desk asked"


def test_it_pays_requests_from_the_projects_token_bucket(project):
    project.rate_limit, project.rate_burst, project.max_per_host = 1.0, 3, 10
    project.save()
    first = plan(project, n=5)["h.test"]
    assert first.granted == 3, "a full bucket pays for the burst"
    assert first.retry_at >= timezone.now() + timedelta(seconds=1.5)
    assert plan(project, n=5)["h.test"].granted == 0, "the bucket is empty until it refills"
