"""max_pages keeps a counter: a discovery batch does not count the whole frontier, and extractors
discovering at once share the budget (the project's row is locked until each one commits), so the
frontier never grows past it."""

import threading

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from crawl.frontier.discovery import pages_discover
from crawl.frontier.verdicts import Link
from crawl.models import Page, Project
from crawl.services.projects import project_get_or_create, seeds_add
from tests.helpers import wait_until

BASE = "http://budget.test"


def links(prefix: str, n: int) -> list[Link]:
    return [Link(f"{BASE}/{prefix}/{i}", 1) for i in range(n)]


def budget_project(max_pages: int) -> Project:
    project = project_get_or_create(name="budget", max_pages=max_pages)
    seeds_add(project=project, urls=[f"{BASE}/"])
    return Project.objects.get(id=project.id)


@pytest.mark.django_db
def test_a_discovery_batch_reads_the_counter_not_the_frontier():
    project = budget_project(max_pages=20)
    pages_discover(project=project, links=links("a", 5))
    with CaptureQueriesContext(connection) as queries:
        pages_discover(project=project, links=links("b", 30))
    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"].upper() and "crawl_page" in q["sql"]]
    assert counts == []
    assert Page.objects.filter(project=project).count() == 20
    assert Project.objects.get(id=project.id).page_count == 20


@pytest.mark.django_db
def test_saving_the_project_keeps_the_counter_and_a_project_without_a_budget_drops_it():
    project = budget_project(max_pages=10)
    stale = Project.objects.get(id=project.id)
    pages_discover(project=project, links=links("a", 3))
    stale.save()  # an admin form's copy, loaded before the discovery
    assert Project.objects.get(id=project.id).page_count == 4
    stale.max_pages = None
    stale.save()
    assert Project.objects.get(id=project.id).page_count is None


def waiting_on_a_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return bool(row) and row[0] == "Lock"


@pytest.mark.django_db(transaction=True)
def test_extractors_discovering_at_once_never_overshoot_the_budget():
    """The first extractor holds its transaction open until the second has either discovered (no
    lock: both saw the same room) or waits for the first's lock; then it commits."""
    project = budget_project(max_pages=10)
    first_done, second_done, second_pid, errors = threading.Event(), threading.Event(), [], []

    def second():
        try:
            first_done.wait(30)
            second_pid.append(connections["default"].cursor().connection.info.backend_pid)
            with transaction.atomic():
                pages_discover(project=Project.objects.get(id=project.id), links=links("second", 9))
        except Exception as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            second_done.set()
            connections.close_all()

    thread = threading.Thread(target=second)
    thread.start()
    with transaction.atomic():
        pages_discover(project=project, links=links("first", 9))
        first_done.set()
        wait_until(
            lambda: second_done.is_set() or (second_pid and waiting_on_a_lock(second_pid[0])),
            timeout=30,
            interval=0.05,
            what="the second extractor to finish or wait",
        )
    thread.join(30)
    assert errors == []
    assert Page.objects.filter(project=project).count() == 10
    assert Project.objects.get(id=project.id).page_count == 10
