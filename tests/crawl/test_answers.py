"""The one recorder of what hosts answered (crawl/hosts/answers.py), for pages and downloads alike,
on the real database."""

from django.utils import timezone

from crawl.hosts.answers import BACKOFF_CODES, HostAnswer, hosts_record_answers
from crawl.models import Host


def test_a_retry_after_holds_the_host_back_for_every_worker_until_then(db):
    before = timezone.now()
    held = hosts_record_answers([HostAnswer("a.test", 429, "30")])
    host = Host.objects.get(host="a.test")
    assert held == {"a.test": host.backoff_until} and host.last_status == 429
    assert 29 <= (host.backoff_until - before).total_seconds() <= 31


def test_a_back_off_without_retry_after_slows_the_host_down_and_answers_bring_it_back(db):
    held = hosts_record_answers([HostAnswer("b.test", 503)])
    assert Host.objects.get(host="b.test").throttle_delay == 1.0 and "b.test" in held
    assert hosts_record_answers([HostAnswer("b.test", 200)]) == {}
    assert Host.objects.get(host="b.test").throttle_delay == 0.8


def test_a_host_that_answered_nothing_counts_a_failure_unless_another_request_got_through(db):
    Host.objects.create(host="d.test", failures=2)
    hosts_record_answers([], reachable={"d.test"}, unreachable={"c.test", "d.test"})
    assert dict(Host.objects.values_list("host", "failures")) == {"c.test": 1, "d.test": 0}


def test_the_back_off_codes_are_the_back_off_answers_and_the_batchs_hold():
    assert BACKOFF_CODES == ("http_429", "http_503", "host_backoff")
