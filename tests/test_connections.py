"""A worker's database connection broken by a server restart is replaced before the next task."""

import pytest
from django.db import InterfaceError, OperationalError, connection, connections

from crawl.connections import connections_refresh


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
