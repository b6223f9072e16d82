"""The one host claim (crawl/hosts/claims.py) on the real database: what may start now, when the
others wait, urgent rows first, and a blocked host's rows handed back to be refused."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from crawl.hosts.claims import IDLE_RETRY_SECONDS, hosts_claim
from crawl.models import Host


@pytest.fixture
def project(make_project):
    return make_project(name="claims", min_delay=1.0, obey_robots=False)


def claim(project, ids, **options):
    with transaction.atomic():
        return hosts_claim([(i, project.id, "h.test") for i in ids], **options)


def test_it_starts_what_the_host_allows_now_and_queues_the_rest_at_its_next_slots(project):
    made = claim(project, [1, 2, 3])
    grant = made.grants[("h.test", project.id)]
    assert list(made.now) == [1] and made.now[1] == (grant, 0)
    assert made.waits == {2: grant.later, 3: grant.later + timedelta(seconds=grant.spacing)}
    assert grant.spacing >= 1.0


def test_an_urgent_row_takes_the_hosts_next_free_slot_ahead_of_the_others(project):
    made = claim(project, [1, 2, 3], urgent=lambda ids: {3} & set(ids))
    grant = made.grants[("h.test", project.id)]
    assert made.waits[3] == grant.free_slot(0) <= made.waits[2]


def test_a_blocked_hosts_rows_are_all_handed_back_to_be_refused(project):
    Host.objects.create(host="h.test", blocked=True, blocked_reason="an operator said so")
    made = claim(project, [1, 2])
    assert set(made.now) == {1, 2} and made.waits == {}
    assert made.grants[("h.test", project.id)].refused == "an operator said so"


def test_a_row_not_started_is_tried_again_at_its_slot_and_never_sooner_than_the_idle_retry(project):
    made = claim(project, [1, 2])
    since = timezone.now()
    retry = made.retry_in({2, 7}, since=since)
    assert retry[7] == IDLE_RETRY_SECONDS, "no slot: it waits for the host's connections"
    assert retry[2] == max(IDLE_RETRY_SECONDS, (made.waits[2] - since).total_seconds())


def test_no_candidates_book_nothing(project):
    made = claim(project, [])
    assert (made.now, made.waits, made.grants) == ({}, {}, {}) and not Host.objects.exists()
