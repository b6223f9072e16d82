"""The politeness planner on the real database: slots, shared in-flight capacity, token bucket."""

import itertools
import uuid
from datetime import timedelta

import pytest
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from crawl.hosts.politeness import (
    GRANT_AHEAD_SECONDS,
    host_back_off,
    hosts_grant,
    hosts_learn_delays,
    hosts_release,
)
from crawl.models import Host, HostLease
from crawl.services.projects import project_get_or_create


@pytest.fixture
def project(make_project):
    return make_project(name="plan", max_per_host=2)


def grant(project, n=5, delay=0.0, host="h.test"):
    """What one claim wanting n pages of `host` may send; `delay`: the host's known Crawl-delay
    (None: its robots.txt not read yet)."""
    Host.objects.update_or_create(host=host, defaults={"crawl_delay": delay})
    with transaction.atomic():
        wanted, projects = {(host, project.id): n}, {project.id: project}
        grants = hosts_grant(wanted=wanted, projects=projects, token=uuid.uuid4(), ahead=GRANT_AHEAD_SECONDS)
    return grants[(host, project.id)]


def test_it_shares_a_hosts_in_flight_capacity_between_batches(project):
    first = grant(project)
    second = grant(project)
    assert (first.granted, first.in_flight) == (5, 2)
    assert (second.granted, second.later) == (0, None), "the first batch holds both connections: these stay due"
    hosts_release(HostLease.objects.get().token)
    assert grant(project).in_flight == 2


def test_a_project_wanting_one_page_of_a_shared_host_is_served_before_another_ones_batch(project):
    """Two projects on one host: claim after claim, the batch of the project whose id sorts first
    must not take the host's whole capacity before the other's one due hub."""
    monitor = project_get_or_create(name="plan-monitor", max_per_host=2)
    Host.objects.update_or_create(host="h.test", defaults={"crawl_delay": 0.0})
    for _ in range(3):
        with transaction.atomic():
            wanted = {("h.test", project.id): 25, ("h.test", monitor.id): 1}
            projects = {project.id: project, monitor.id: monitor}
            grants = hosts_grant(wanted=wanted, projects=projects, token=uuid.uuid4(), ahead=GRANT_AHEAD_SECONDS)
        assert grants[("h.test", monitor.id)].in_flight == 1
        assert grants[("h.test", project.id)].in_flight == 1, "the batch gets what is left of the cap"
        HostLease.objects.all().delete()


def test_polite_hosts_booked_by_one_claim_start_a_few_milliseconds_apart(project):
    """Fifty polite hosts due at one instant: their slots are staggered, so the one event loop that
    sends them one after another is on time for each."""
    from crawl.hosts.politeness import STAGGER_SECONDS

    names = [f"h{i}.test" for i in range(50)]
    for name in names:
        Host.objects.update_or_create(host=name, defaults={"crawl_delay": 1.0})
    with transaction.atomic():
        grants = hosts_grant(
            wanted={(name, project.id): 1 for name in names},
            projects={project.id: project},
            token=uuid.uuid4(),
            ahead=GRANT_AHEAD_SECONDS,
        )
    starts = sorted(grant.start_at for grant in grants.values())
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(starts)]
    assert min(gaps) >= STAGGER_SECONDS - 1e-6
    assert (starts[-1] - starts[0]).total_seconds() < 50 * STAGGER_SECONDS + 0.01
    nexts = {row.host: row.next_allowed_at for row in Host.objects.filter(host__in=names)}
    for name in names:  # the next slot keeps the staggered start's phase
        assert (nexts[name] - grants[(name, project.id)].start_at).total_seconds() >= 1.1 - 1e-6


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


def test_a_first_request_sent_before_the_delay_was_known_still_keeps_it(project):
    """However late the worker sends the first request after reading robots.txt, the host's next
    slot is at least the delay after the latest moment that request may start."""
    grant(project, n=4, delay=None)
    learned = hosts_learn_delays({"h.test": 1.0})
    hosts_release(HostLease.objects.get().token)
    second = grant(project, n=1, delay=1.0)
    assert set(learned) == {"h.test"}
    assert second.start_at >= learned["h.test"] + timedelta(seconds=1.0)
    assert hosts_learn_delays({"h.test": 1.0}) == {}, "a delay already known gives no first request"


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


def test_a_host_answering_429_without_retry_after_is_slowed_once_per_incident_then_forgiven(project, settings):
    """AutoThrottle's idea, forgiving: 429s without Retry-After within an incident window double the
    host's extra delay once and hold it that long (with jitter); its pages wait without spending
    attempts; answers bring the delay down, and after a quiet period it is back at the floor."""
    from crawl.models import Page
    from crawl.services.projects import seeds_add
    from fetch.services import pages_fetch
    from tests.servers import Site, SiteServer

    project.allow_private, project.obey_robots = True, False
    project.save()
    window = timedelta(seconds=settings.CRAWL_THROTTLE_WINDOW_SECONDS)
    site = Site(default=(200, {"Content-Type": "text/html"}, b"<html><body>ok</body></html>"))
    site.files["/busy"] = (429, {"Content-Type": "text/plain"}, b"too many requests")
    with SiteServer(site) as server:
        (page_id,) = seeds_add(project=project, urls=[f"{server.url}/busy"])

        def fetch_now(answered: bool) -> Host:
            past = timezone.now() - timedelta(seconds=1)
            Page.objects.filter(id=page_id).update(state="queued", next_fetch_at=past)
            Host.objects.update(backoff_until=None, next_allowed_at=past)
            assert pages_fetch(page_ids=[page_id]) == ([page_id] if answered else [])
            HostLease.objects.all().delete()
            return Host.objects.get()

        delays = []
        for later_window in (False, False, False, True, True):
            if later_window:  # the incident's window has passed: the next 429 is a new incident
                Host.objects.update(throttle_since=F("throttle_since") - window)
            host = fetch_now(answered=False)
            delays.append(host.throttle_delay)
            page = Page.objects.get(id=page_id)
            assert (page.state, page.attempts, page.error_code) == ("queued", 0, "http_429"), "it waits, no attempt"
            assert page.next_fetch_at >= host.backoff_until - timedelta(seconds=0.01)
            held = (host.backoff_until - host.throttled_at).total_seconds()
            assert host.throttle_delay <= held <= host.throttle_delay * 1.25 + 0.01, "held its delay, with jitter"
        assert delays == [1.0, 1.0, 1.0, 2.0, 4.0], "three 429s of one window are one incident"
        assert host.slow_reason == "HTTP 429 without Retry-After"
        assert grant(project, n=2, host=host.host).spacing >= 4.0, "the host's slots are spaced by its extra delay"
        HostLease.objects.all().delete()
        for expected in (3.2, 2.56):
            site.files["/busy"] = (200, {"Content-Type": "text/html"}, f"<html><body>{expected}</body></html>".encode())
            assert fetch_now(answered=True).throttle_delay == pytest.approx(expected)
        Host.objects.update(throttled_at=F("throttled_at") - timedelta(seconds=settings.CRAWL_THROTTLE_FORGIVE_SECONDS))
        assert grant(project, n=2, host=host.host).spacing == 0.0, "after the quiet period: the floor"
        HostLease.objects.all().delete()
        site.files["/busy"] = (200, {"Content-Type": "text/html"}, b"<html><body>forgiven</body></html>")
        assert fetch_now(answered=True).throttle_delay == 0.0
        site.files["/busy"] = (429, {"Content-Type": "text/plain"}, b"too many requests")
        assert fetch_now(answered=False).throttle_delay == 1.0, "a new incident starts again from the start"


def test_a_hosts_max_in_flight_overrides_the_projects_cap_both_ways(project):
    Host.objects.update_or_create(host="h.test", defaults={"max_in_flight": 5})
    assert grant(project).in_flight == 5, "raised above the project's max_per_host of 2"
    hosts_release(HostLease.objects.get().token)
    Host.objects.filter(host="h.test").update(max_in_flight=1)
    assert grant(project).in_flight == 1


def test_a_down_host_lets_one_probe_through_its_hold_and_its_answer_makes_its_pages_due(make_project, settings):
    """A host that stopped answering is held back (its pages wait) and probed: once its probe time
    has come, a claim may send one request, and a waiting page that is never given up is made due
    for it. The moment the host answers, every page waiting for it after a failure is due again,
    however long its own retry back-off."""
    from crawl.frontier.probes import pages_probe_down_hosts
    from crawl.hosts.politeness import hosts_answered, hosts_note_failures
    from crawl.models import Page

    project = make_project(name="watched", recrawl_every_minutes=1)
    later = timezone.now() + timedelta(seconds=settings.CRAWL_RETRY_LONG_SECONDS)
    pages = [
        Page.objects.create(
            project=project,
            url=f"http://h.test/{i}",
            url_key=f"{i:064d}",
            host="h.test",
            state="queued",
            next_fetch_at=later,
            error_code="connect_error",
            content_sha256="ab" * 32 if i else "",
        )
        for i in range(3)
    ]
    for _ in range(3):
        hosts_note_failures(robots_unreadable=set(), unreachable={"h.test"})
    host = Host.objects.get(host="h.test")
    assert host.down_since is not None and host.backoff_until > timezone.now() and host.failures == 3
    assert grant(project, n=3, host="h.test").granted == 0, "held, and its probe is not due yet"
    assert pages_probe_down_hosts() == 0
    Host.objects.update(probe_at=timezone.now())
    assert pages_probe_down_hosts() == 1
    due = Page.objects.filter(next_fetch_at__lte=timezone.now())
    assert list(due.values_list("id", flat=True)) == [pages[1].id], "a page fetched before carries the probe"
    probe = grant(project, n=3, host="h.test")
    assert (probe.granted, probe.later) == (1, host.backoff_until), "one request; the others wait for the hold"
    assert grant(project, n=3, host="h.test").granted == 0, "one probe at a time"
    hosts_note_failures(robots_unreadable=set(), unreachable={"h.test"})
    failed = Host.objects.get(host="h.test")
    assert (failed.failures, failed.backoff_until) == (3, host.backoff_until), "a failed probe moves the next one"
    assert failed.probe_at >= timezone.now() + timedelta(seconds=settings.CRAWL_HOST_PROBE_SECONDS - 1)
    hosts_answered(reachable={"h.test"}, unthrottled={"h.test"})
    back = Host.objects.get(host="h.test")
    assert (back.failures, back.down_since, back.backoff_until, back.probe_at) == (0, None, None, None)
    assert back.recovered_at is not None
    assert Page.objects.filter(next_fetch_at__lte=timezone.now()).count() == 3, "due now, not at their long retry"
