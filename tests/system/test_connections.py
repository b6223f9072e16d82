"""A worker's database connection broken by a server restart is replaced before the next task."""

import pytest
from django.db import InterfaceError, OperationalError, connection, connections

from crawlproject.dbconnections import connections_refresh


def _kill_backend_of(conn) -> None:
    pid = conn.connection.info.backend_pid
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    finally:
        other.close()


@pytest.mark.django_db(transaction=True)
def test_it_replaces_a_connection_whose_server_side_went_away():
    connection.ensure_connection()
    _kill_backend_of(connection)
    with pytest.raises((OperationalError, InterfaceError)), connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    assert connection.errors_occurred
    connections_refresh()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


@pytest.mark.django_db(transaction=True)
def test_it_keeps_a_healthy_connection():
    connection.ensure_connection()
    before = connection.connection
    connections_refresh()
    assert connection.connection is before


def _synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


class _Task:
    def __init__(self, name: str):
        self.name = name


@pytest.mark.django_db(transaction=True)
def test_stage_tasks_commit_without_waiting_for_the_disk_and_other_tasks_wait(settings):
    from crawlproject.dbconnections import stage_commits

    stage_commits(task=_Task("scrape.extract_batch"))
    assert _synchronous_commit() == "off"
    stage_commits(task=_Task("console.jobs_tick"))
    assert _synchronous_commit() == "on"
    settings.CRAWL_STAGE_SYNCHRONOUS_COMMIT = True
    stage_commits(task=_Task("crawl.fetch_batch"))
    assert _synchronous_commit() == "on"


@pytest.mark.django_db(transaction=True)
def test_the_rows_a_feed_reads_by_id_commit_durably_even_in_a_stage_task():
    from django.db import transaction

    from core.batchsql import commit_order_lock
    from crawlproject.dbconnections import stage_commits

    stage_commits(task=_Task("scrape.extract_batch"))
    with transaction.atomic():
        commit_order_lock("crawl.PageVersion")
        assert _synchronous_commit() == "on"
    assert _synchronous_commit() == "off", "only that transaction"
