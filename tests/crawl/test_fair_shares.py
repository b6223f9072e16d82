"""Fair shares between projects: each claim of fetch, extract and download gives every project with
work a share of the batch by its weight (Project.weight, 1 by default)."""

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from crawl.frontier.fair import fair_rows
from crawl.frontier.pages import pages_ready
from crawl.models import Page
from crawl.services.projects import project_get_or_create, seeds_add


def backlog(sizes: dict[int, int]):
    """rows_of over projects owing `sizes[p]` rows each, named (p, k); records each probe."""
    probes = []

    def rows_of(project_id: int, offset: int, count: int) -> list:
        probes.append((project_id, offset, count))
        return [(project_id, k) for k in range(offset, min(offset + count, sizes[project_id]))]

    return rows_of, probes


def test_equal_weights_share_a_batch_equally_and_interleave():
    rows_of, _ = backlog({1: 1000, 2: 1000})
    rows = fair_rows({1: 1, 2: 1}, 10, rows_of)
    assert [p for p, _ in rows] == [1, 2] * 5


def test_a_project_of_weight_three_gets_three_rows_for_each_of_another_ones():
    rows_of, _ = backlog({1: 1000, 2: 1000})
    rows = fair_rows({1: 3, 2: 1}, 40, rows_of)
    assert [p for p, _ in rows].count(1) == 30 and len(rows) == 40
    assert [p for p, _ in rows[:8]].count(2) == 2, "the lighter project is served all along the batch"


def test_a_share_left_unused_goes_to_the_projects_with_more():
    rows_of, probes = backlog({1: 2, 2: 1000, 3: 1000})
    rows = fair_rows({1: 5, 2: 1, 3: 1}, 30, rows_of)
    counts = {p: [q for q, _ in rows].count(p) for p in (1, 2, 3)}
    assert counts == {1: 2, 2: 14, 3: 14}
    assert len(probes) <= 6, "one probe per project per round, not one per row"


def test_a_weight_outside_one_to_a_hundred_is_refused(db):
    project = project_get_or_create(name="weights", allow_private=True)
    for bad in (0, 101):
        project.weight = bad
        with pytest.raises(ValidationError):
            project.full_clean()


@pytest.mark.django_db(transaction=True)
def test_a_fetch_claim_gives_a_heavier_project_its_weight_in_pages():
    heavy = project_get_or_create(name="heavy", allow_private=True)
    light = project_get_or_create(name="light", allow_private=True)
    heavy.weight = 2
    heavy.save(update_fields=["weight"])
    seeds_add(project=heavy, urls=[f"http://heavy.test/{i}" for i in range(100)])
    seeds_add(project=light, urls=[f"http://light.test/{i}" for i in range(100)])
    assert Page.objects.filter(state="queued").count() == 200
    with transaction.atomic():
        ready = pages_ready(limit=30, render=False, due=timezone.now())
    by_project = [project_id for _, project_id, _ in ready]
    assert (by_project.count(heavy.id), by_project.count(light.id)) == (20, 10)
