"""Politeness per server on the real database: two ports of one address are two servers, a
project grouping by IP gives one machine's names one budget, and the migration that re-keys the
rows of servers on other ports."""

import importlib
import uuid

import pytest
from django.apps import apps
from django.db import transaction
from django.utils import timezone

from console.health.models import Alert, HealthCounter, Monitor
from core.canonical import host_of
from core.net.addresses import addresses_forget
from crawl.hosts.politeness import HOLD_AFTER_FAILURES, hosts_grant, hosts_note_failures, hosts_release
from crawl.models import Host, HostLease, Page

A, B = "127.0.0.1:8001", "127.0.0.1:8002"


@pytest.fixture(autouse=True)
def _fresh_addresses():
    addresses_forget()


def claim(wanted: dict, *projects) -> dict:
    with transaction.atomic():
        return hosts_grant(wanted=wanted, projects={p.id: p for p in projects}, token=uuid.uuid4(), ahead=0.0)


def test_a_dead_port_holds_back_its_own_server_and_not_another_port_of_the_address(make_project):
    dead, live = make_project(name="dead"), make_project(name="live")
    Host.objects.bulk_create([Host(host=h, crawl_delay=0.0) for h in (A, B)])
    for _ in range(HOLD_AFTER_FAILURES):
        held = hosts_note_failures(robots_unreadable=set(), unreachable={A})
    grants = claim({(A, dead.id): 2, (B, live.id): 2}, dead, live)
    assert set(held) == {A} and grants[(A, dead.id)].granted == 0
    assert grants[(B, live.id)].granted == 2, "the other port's project is not slowed"
    assert Host.objects.get(host=B).backoff_until is None
    assert not Host.objects.filter(host="127.0.0.1").exists()


def test_a_project_grouping_by_ip_books_one_machines_two_names_on_one_budget(make_project):
    grouped = make_project(name="grouped", min_delay=2.0, max_per_host=1, politeness_group="ip")
    apart = make_project(name="apart", min_delay=2.0, max_per_host=1)
    names = ("localhost:8003", "127.0.0.1:8003")
    Host.objects.bulk_create([Host(host=h, crawl_delay=0.0) for h in names])
    two = claim({(names[0], apart.id): 1, (names[1], apart.id): 1}, apart)
    assert [two[(n, apart.id)].granted for n in names] == [1, 1], "without grouping: two servers, two budgets"
    HostLease.objects.all().delete()
    Host.objects.update(next_allowed_at=timezone.now())

    one = claim({(names[0], grouped.id): 1, (names[1], grouped.id): 1}, grouped)
    granted = [one[(n, grouped.id)] for n in names]
    assert sum(g.granted for g in granted) == 1, "one budget: one connection, one slot now"
    assert HostLease.objects.get().host == "127.0.0.1:8003"
    waiting = next(g for g in granted if not g.granted)
    assert waiting.later is None, "the group's one connection is in use: the other name's page stays due"
    hosts_release(HostLease.objects.get().token, hosts=[g.host for g in granted if g.granted])
    later = claim({(names[0], grouped.id): 1, (names[1], grouped.id): 1}, grouped)
    first = next(g for g in granted if g.granted)
    assert all(later[(n, grouped.id)].start_at.timestamp() >= first.slot(0) + 2.0 for n in names)


def test_the_migration_rekeys_pages_on_other_ports_and_gives_their_servers_the_hosts_settings(make_project):
    project = make_project(name="ported")
    urls = ("http://127.0.0.1:8001/a", "http://127.0.0.1/b", "http://[::1]:8080/", "https://example.com/")
    Page.objects.bulk_create(
        [Page(project=project, url=u, url_key=str(i), host=host_of(u)) for i, u in enumerate(urls)]
    )
    Host.objects.create(host="127.0.0.1", blocked=True, blocked_reason="asked us to stop", min_delay=3.0)
    monitor = Monitor.objects.create(project=project, kind="site_down")
    Alert.objects.create(project=project, monitor=monitor, subject="host ::1", message="::1 is down")
    HealthCounter.objects.create(project=project, scope="host", key="::1", metric="fetch_failed", bucket=timezone.now())

    importlib.import_module("crawl.migrations.0023_servers_by_port").pages_by_server(apps, None)
    importlib.import_module("console.migrations.0011_servers_by_port").counters_by_server(apps, None)
    keys = dict(Page.objects.values_list("url", "host"))
    assert [keys[u] for u in urls] == [A, "127.0.0.1", "[::1]:8080", "example.com"]
    ported = Host.objects.get(host=A)
    assert (ported.blocked, ported.blocked_reason, ported.min_delay) == (True, "asked us to stop", 3.0)
    assert Alert.objects.get().subject == "host [::1]:8080"
    assert HealthCounter.objects.get().key == "[::1]:8080"


def test_a_hosts_counters_stay_under_its_name_when_it_was_crawled_on_two_ports(make_project):
    project = make_project(name="two ports")
    urls = ("http://127.0.0.1:8001/", "http://127.0.0.1:8002/")
    Page.objects.bulk_create([Page(project=project, url=u, url_key=u, host="127.0.0.1") for u in urls])
    HealthCounter.objects.create(
        project=project, scope="host", key="127.0.0.1", metric="fetch_ok", bucket=timezone.now()
    )
    importlib.import_module("crawl.migrations.0023_servers_by_port").pages_by_server(apps, None)
    importlib.import_module("console.migrations.0011_servers_by_port").counters_by_server(apps, None)
    assert sorted(Page.objects.values_list("host", flat=True)) == [A, B]
    assert HealthCounter.objects.get().key == "127.0.0.1", "the past figures of two servers cannot be told apart"
