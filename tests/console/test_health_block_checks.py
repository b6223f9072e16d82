"""The "host blocked" monitor, a project's block rules as every way in checks them, and the
evidence kept of a blocked answer, on a real database."""

from collections import Counter
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from console.health.counters import counters_add
from console.health.models import Alert, Monitor
from console.health.monitors import monitor_run, monitors_ensure
from core.blocks import Blocked
from core.masking import MASK
from core.net.client import FetchResponse
from crawl.frontier.verdicts import Postpone, Retry
from crawl.models import HostBlock, Page, SessionCookie
from fetch.blocks import blocks_judge, blocks_record
from fetch.outcomes import outcome

pytestmark = pytest.mark.django_db
CAPTCHA = b"<html><head><title>Are you a robot?</title></head><body>token abc-secret-1 CAPTCHA</body></html>"


@pytest.fixture
def project(make_project):
    project = make_project(name="walled", cookies={"auth": "abc-secret-1"})
    monitors_ensure([project.id])
    return project


def page_of(project, url: str) -> Page:
    return Page.objects.create(project=project, url=url, url_key=url[-64:], host="shop.test")


def answer(url: str, body: bytes = CAPTCHA) -> FetchResponse:
    return FetchResponse(url=url, status_code=200, headers={"content-type": "text/html"}, body=body)


def run(project, at):
    monitor = Monitor.objects.get(project=project, kind=Monitor.Kind.HOST_BLOCKED)
    return monitor_run(monitor, project, at)


def test_it_alerts_on_a_host_that_answers_block_pages_with_the_evidence_and_recovers(project, monkeypatch):
    page = page_of(project, "http://shop.test/a")
    blocks = blocks_judge([page], [answer(page.url)])
    assert blocks == {page.id: Blocked("block title", "title 'Are you a robot?'")}
    blocks_record([page], [answer(page.url)], blocks)
    now = timezone.now()
    counters_add(None, project_id=project.id, counts=Counter({("host", "shop.test", "fetch_blocked"): 3}))
    assert run(project, now) == (1, 0)
    alert = Alert.objects.get(project=project, monitor__kind=Monitor.Kind.HOST_BLOCKED)
    assert alert.subject == "host shop.test" and "answered 3 block pages" in alert.message
    assert alert.evidence["url"] == page.url and alert.evidence["rule"] == "block title"
    assert "CAPTCHA" in alert.evidence["sample"] and "abc-secret-1" not in alert.evidence["sample"]
    assert MASK in alert.evidence["sample"]

    later = now + timedelta(minutes=20)  # the blocks are out of the window; the host answers again
    monkeypatch.setattr("console.health.counters.timezone.now", lambda: later)
    counters_add(None, project_id=project.id, counts=Counter({("host", "shop.test", "fetch_ok"): 5}))
    assert run(project, later) == (0, 1)


def test_too_few_blocks_open_no_alert(project):
    counters_add(None, project_id=project.id, counts=Counter({("host", "shop.test", "fetch_blocked"): 2}))
    assert run(project, timezone.now()) == (0, 0)


def test_the_evidence_masks_the_sessions_cookies(project):
    SessionCookie.objects.create(project=project, domain="shop.test", name="sid", value="sess-777-value")
    page = page_of(project, "http://shop.test/b")
    response = answer(page.url, CAPTCHA.replace(b"CAPTCHA", b"sess-777-value"))
    blocks_record([page], [response], blocks_judge([page], [response]))
    assert "sess-777-value" not in HostBlock.objects.get(project=project).sample


def test_a_users_rules_are_checked_and_applied(project):
    project.block_rules = [{"status": "403"}]
    with pytest.raises(ValidationError, match="status must be an HTTP status code"):
        project.full_clean()
    project.block_rules, project.block_detection = [{"name": "login wall", "selector": "form#login"}], False
    project.full_clean()
    project.save()
    page = page_of(project, "http://shop.test/c")
    wall = answer(page.url, b'<html><body><form id="login"></form></body></html>')
    assert blocks_judge([page], [answer(page.url)]) == {}  # the built-in rules are off
    assert blocks_judge([page], [wall])[page.id].rule == "login wall"


def test_a_body_much_shorter_than_the_hosts_usual_one_is_blocked(project):
    for i in range(5):
        Page.objects.create(
            project=project, url=f"http://shop.test/{i}", url_key=str(i), host="shop.test", content_length=8000
        )
    project.block_rules = [{"shorter_than": 0.2}]
    project.save()
    page = page_of(project, "http://shop.test/short")
    found = blocks_judge([page], [answer(page.url, b"<html><body>Try later</body></html>")])
    assert found[page.id].rule == "rule 1" and "usual 8000" in found[page.id].reason


def test_a_blocked_answer_waits_for_its_hosts_hold_and_names_its_rule(project):
    page = page_of(project, "http://shop.test/d")
    blocked = blocks_judge([page], [answer(page.url)])[page.id]
    until = timezone.now() + timedelta(seconds=2)
    verdict = outcome(page, answer(page.url), until, blocked)
    assert isinstance(verdict, Postpone) and verdict.code == "blocked" and verdict.until == until
    assert verdict.message == "blocked by rule 'block title': title 'Are you a robot?'"
    assert verdict.fields["status_code"] == 200 and "content_sha256" not in verdict.fields  # nothing stored
    assert isinstance(outcome(page, answer(page.url), None, blocked), Retry)
