"""The HTTP sink (webhooks on results): each batch is one signed POST to a real receiver on loopback,
through the egress guard; a redelivered batch carries the same record keys, so the receiver keeps
every record once; a refusing receiver is retried with back-off and shown failing, and loses nothing,
even with a worker killed mid-delivery."""

import json
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.utils import timezone

from crawl.models import Project
from scrape.models import Item
from sinks.delivery import sink_counts, sink_deliver, sinks_offer, sinks_tick
from sinks.kinds import writer_for
from sinks.models import Sink, SinkDelivery
from sinks.signing import signature, signature_valid, signed_headers
from sinks.webhooks import ReceiverRefused
from tests.conftest import BASE_DIR, last_json_line, run_manage
from tests.helpers import wait_until
from tests.webhook_receiver import WebhookReceiver

SECRET = "a-shared-secret-of-the-tests-0123456789"


def records(n: int, start: int = 0) -> list[dict]:
    return [{"key": f"k{i}", "type": "item", "kind": "page", "data": {"i": i}} for i in range(start, start + n)]


def http_sink(project: Project, url: str, **fields) -> Sink:
    sink = Sink(project=project, name="hook", kind="http", config={"url": url, "secret": SECRET}, **fields)
    sink.full_clean()
    sink.save()
    return sink


def test_the_signature_is_the_hmac_of_the_timestamp_and_the_body():
    body = b'{"records": []}'
    headers = signed_headers(SECRET, body, now=1_700_000_000)
    assert headers["X-Crawlhub-Timestamp"] == "1700000000"
    # HMAC-SHA256(secret, "1700000000." + body), computed independently of the module's helper:
    import hashlib
    import hmac

    expected = hmac.new(SECRET.encode(), b"1700000000." + body, hashlib.sha256).hexdigest()
    assert headers["X-Crawlhub-Signature"] == f"sha256={expected}" == signature(SECRET, "1700000000", body)
    lowered = {k.lower(): v for k, v in headers.items()}
    assert signature_valid(SECRET, lowered, body, now=1_700_000_100)
    assert not signature_valid(SECRET, headers, body + b" ", now=1_700_000_100), "a changed body"
    assert not signature_valid("another-secret-0123456789", headers, body, now=1_700_000_100), "another secret"
    assert not signature_valid(SECRET, headers, body, now=1_700_000_000 + 3600), "a replay an hour later"
    assert not signature_valid(SECRET, {}, body), "no signature"


@pytest.mark.parametrize(
    ("timestamp", "given"),
    [
        ("²", None),
        ("1700000000²", None),
        ("١٧٠٠٠٠٠٠٠٠", None),  # Arabic-Indic digits: isdigit() but not ours
        ("9" * 5000, None),  # more digits than int() takes
        ("1700000000", "sha256=é"),
        ("1700000000", "sha256=\udc80"),
        ("1700000000", "²" * 71),
    ],
)
def test_a_malformed_timestamp_or_signature_is_invalid_and_never_raises(timestamp, given):
    body = b'{"records": []}'
    headers = signed_headers(SECRET, body, now=1_700_000_000)
    headers["X-Crawlhub-Timestamp"] = timestamp
    if given is not None:
        headers["X-Crawlhub-Signature"] = given
    assert signature_valid(SECRET, headers, body, now=1_700_000_000) is False
    valid = _docs_verifier()
    assert valid(SECRET, headers, body) is False, "the docs' snippet, too"


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"url": "ftp://receiver.test/hook", "secret": SECRET}, "an http:// or https:// URL"),
        ({"url": "https:///hook", "secret": SECRET}, "with a host"),
        ({"url": "https://receiver.test/hook", "secret": "short"}, "at least 16 characters"),
        ({"url": "https://receiver.test/hook"}, "at least 16 characters"),
        ({"url": "https://receiver.test/hook", "secret": SECRET, "timeout": 0}, "timeout"),
        ({"url": "https://receiver.test/hook", "secret": SECRET, "headers": {}}, "unknown keys"),
    ],
)
def test_a_bad_http_sink_configuration_is_refused_with_the_reason(db, config, problem):
    project = Project.objects.create(name="conf", slug="conf")
    with pytest.raises(ValidationError, match=problem):
        Sink(project=project, name="bad", kind="http", config=config).full_clean()


def test_each_batch_is_one_signed_post_and_a_redelivered_batch_has_the_same_keys(db):
    project = Project.objects.create(name="direct", slug="direct", allow_private=True)
    with WebhookReceiver(SECRET) as receiver:
        sink = http_sink(project, receiver.url)
        writer_for(sink).deliver(records(3), batch="b1")
        writer_for(sink).deliver(records(3), batch="b1")  # the worker died before marking it delivered
        writer_for(sink).deliver(records(2, start=3), batch="b2")
        posts = [r for r in receiver.server.requests if r.method == "POST"]
    assert receiver.bad_signatures == 0 and receiver.accepted == 3
    assert sorted(receiver.records) == ["k0", "k1", "k2", "k3", "k4"]
    assert receiver.handed == ["k0", "k1", "k2", "k0", "k1", "k2", "k3", "k4"]
    assert [p.headers["X-Crawlhub-Batch"] for p in posts] == ["b1", "b1", "b2"]
    envelope = json.loads(posts[0].body)
    assert (envelope["project"], envelope["sink"], envelope["records"][0]["data"]) == ("direct", "hook", {"i": 0})


def test_the_http_sink_reaches_only_addresses_the_project_may_fetch(db):
    project = Project.objects.create(name="public", slug="public")  # no private addresses
    with WebhookReceiver(SECRET) as receiver:
        sink = http_sink(project, receiver.url)
        with pytest.raises(ReceiverRefused, match="blocked_address"):
            writer_for(sink).deliver(records(1), batch="b1")
        assert receiver.server.requests == [], "nothing reached the receiver"


def test_a_refusing_receiver_is_retried_later_and_shown_failing_in_the_console(db, admin_client):
    project = Project.objects.create(name="refused", slug="refused", allow_private=True)
    with WebhookReceiver(SECRET) as receiver:
        sink = http_sink(project, receiver.url)
        sinks_offer(project.id, records(3))
        receiver.refusing = True
        before = timezone.now()
        assert sink_deliver(sink.id) == 0
        waiting = list(SinkDelivery.objects.filter(sink=sink))
        assert {(r.state, r.attempts) for r in waiting} == {("pending", 1)}
        assert all(r.next_at > before + timedelta(seconds=1) for r in waiting), "it waits (back-off)"
        assert sink_deliver(sink.id) == 0, "not due yet: nothing is sent"
        assert receiver.refused == 1
        row = admin_client.get("/admin/sinks/sink/").content.decode().split('class="field-name"', 1)[1]
        assert "HTTP 500 Internal Server Error from http://127.0.0.1:" in row.split("</tr>", 1)[0]
        assert "/hook" not in row and "the receiver is down" not in row, "its path and reply are not shown"

        receiver.refusing = False
        SinkDelivery.objects.filter(sink=sink).update(next_at=timezone.now())  # the back-off has passed
        assert sink_deliver(sink.id) == 3
    assert sink_counts(sink)["done"] == 3 and sorted(receiver.records) == ["k0", "k1", "k2"]


def test_a_refusing_webhooks_error_and_log_keep_no_password_path_query_or_reply(db, caplog):
    """Issue 47, point 3: the last error (shown to viewers) and the worker log mask the webhook URL's
    password, path and query (where Slack, Discord and Teams keep their secret), and keep no reply."""
    project = Project.objects.create(name="leaky", slug="leaky", allow_private=True)
    with WebhookReceiver(SECRET) as receiver:
        host = receiver.url.removeprefix("http://").removesuffix("/hook")
        sink = http_sink(project, f"http://crawler:pw-s3cret@{host}/hook?token=query-s3cret")
        sinks_offer(project.id, records(1))
        receiver.refusing = True
        assert sink_deliver(sink.id) == 0 and receiver.refused == 1
    error = SinkDelivery.objects.get(sink=sink).error
    assert error == f"ReceiverRefused: HTTP 500 Internal Server Error from http://crawler:***@{host}/***"
    for leak in ("pw-s3cret", "query-s3cret", "/hook", "the receiver is down"):
        assert leak not in error and leak not in caplog.text, leak


def test_the_sink_secret_is_never_shown_and_a_masked_one_sent_back_keeps_it(db, admin_client):
    project = Project.objects.create(name="masked", slug="masked", allow_private=True)
    sink = http_sink(project, "http://user:pw@receiver.test/hook")
    shown = admin_client.get(f"/api/sinks/{sink.id}/").json()["config"]
    assert shown == {"url": "http://user:***@receiver.test/***", "secret": "***"}
    changed = admin_client.patch(
        f"/api/sinks/{sink.id}/", {"config": shown | {"timeout": 10}}, content_type="application/json"
    )
    assert changed.status_code == 200, changed.content
    sink.refresh_from_db()
    assert sink.config == {"url": "http://user:pw@receiver.test/hook", "secret": SECRET, "timeout": 10}
    assert SECRET not in admin_client.get(f"/admin/sinks/sink/{sink.id}/change/").content.decode()


@pytest.mark.integration
@pytest.mark.fault
def test_the_http_sink_delivers_every_item_of_a_crawl_once_across_a_kill_and_a_refusing_receiver(
    site_server, workers, worker_env, tmp_path, django_user_model
):
    with WebhookReceiver(SECRET) as receiver:
        receiver.refuse_for(60)  # its own switch: a 500 to everything for a minute from the first POST
        crawl_through_a_kill_and_refusals(receiver, site_server, workers, worker_env, tmp_path, django_user_model)


def crawl_through_a_kill_and_refusals(receiver, site_server, workers, worker_env, tmp_path, django_user_model):
    project = Project.objects.create(name="hooks", slug="hooks", allow_private=True, download_media=False)
    sink = http_sink(project, receiver.url)
    crash_dir = tmp_path / "crashes"
    # The extract worker's pool process is SIGKILLed once, after the receiver took a batch and before
    # the batch was marked delivered (sinks/delivery.py _fault_after_write): the worst moment.
    env = worker_env | {"CRAWLHUB_FAULT_SINK_CRASH_DIR": str(crash_dir), "CRAWL_SINK_LEASE_SECONDS": "3"}
    workers.env = env
    for stage in ("fetch", "extract"):
        workers.start(stage, stage)
    done = run_manage(["crawl", f"{site_server.url}/", "--project", "hooks", "--json", "--timeout", "240"], env)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = last_json_line(done.stdout)
    assert summary["sinks"]["hook"]["done"] == 0, "a refusing receiver holds back no crawl"
    admin = django_user_model.objects.create_superuser("root", password="not-used")
    console = Client()
    console.force_login(admin)
    row = console.get("/admin/sinks/sink/").content.decode().split('class="field-name"', 1)[1]
    shown = row.split("</tr>", 1)[0]
    assert "HTTP 500 Internal Server Error from" in shown, "the console shows the sink failing"
    assert "/***" in shown, "its URL masked"

    def delivered():
        sinks_tick()  # what beat does every 10 s: due retries woken, a killed worker's lease returned
        counts = sink_counts(sink)
        return counts["pending"] + counts["leased"] == 0 and counts

    counts = wait_until(delivered, timeout=240, interval=0.5, what="every record delivered")
    items = Item.objects.filter(project=project).count()
    expected = sorted(SinkDelivery.objects.filter(sink=sink).values_list("key", flat=True))
    assert items > 250 and summary["items"] == items and len(expected) == items, "one record per item"
    assert counts["done"] == items and counts["failed"] == 0
    assert [p.name for p in crash_dir.iterdir()] == [f"sink-{sink.id}"], "a worker was killed mid-delivery"
    assert receiver.bad_signatures == 0, "every request's signature verified"
    assert receiver.refused >= 5 and SinkDelivery.objects.filter(sink=sink, attempts__gte=5).exists(), (
        "batches were refused again and again, each time after a longer wait, and still delivered"
    )
    assert sorted(receiver.records) == expected, "every item, each kept once by its key"
    assert {r["type"] for r in receiver.records.values()} == {"item"}
    assert len(receiver.handed) > len(set(receiver.handed)), "the killed worker's batch came again"


def _docs_verifier():
    """The receiver's check that docs/operating.md offers."""
    text = (BASE_DIR / "docs" / "operating.md").read_text()
    section = text.split("### Webhook signatures", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace = {}
    exec(compile(code, "operating.md", "exec"), namespace)  # our own documentation
    return namespace["crawlhub_signature_valid"]


def test_the_verification_snippet_in_the_docs_accepts_our_requests_and_nothing_else():
    valid = _docs_verifier()
    body = json.dumps({"records": [{"key": "k0"}]}).encode()
    headers = signed_headers(SECRET, body)
    assert valid(SECRET, headers, body)
    assert not valid(SECRET, headers, body.replace(b"k0", b"k1"))
    assert not valid("not-the-secret-0123456789", headers, body)


def test_a_refusing_sink_shows_its_masked_error_and_since_when_and_its_monitor_alerts_and_recovers(db, admin_client):
    """Beyond the admin list: GET /api/sinks/N/, `manage.py sinks` and the sink failing monitor show
    the last error, with the URL's password masked, and since when; a delivery clears it."""
    from io import StringIO

    from django.core.management import call_command

    from console.health.counters import project_health
    from console.health.models import Alert, Monitor
    from console.health.monitors import monitor_run, monitors_ensure

    project = Project.objects.create(name="watched", slug="watched", allow_private=True)
    monitors_ensure([project.id])
    with WebhookReceiver(SECRET) as receiver:
        url = receiver.url.replace("http://", "http://hook:pa55word-of-the-hook@")
        sink = http_sink(project, url)
        sinks_offer(project.id, records(2))
        receiver.refusing = True
        before = timezone.now()
        assert sink_deliver(sink.id) == 0
        assert "pa55word" not in SinkDelivery.objects.filter(sink=sink).first().error, "masked where it is stored"
        shown = admin_client.get(f"/api/sinks/{sink.id}/").json()
        assert "HTTP 500" in shown["last_error"] and "pa55word" not in shown["last_error"]
        assert shown["failing_since"] is not None and before <= timezone.datetime.fromisoformat(shown["failing_since"])
        out = StringIO()
        call_command("sinks", "watched", stdout=out)
        assert "failing since" in out.getvalue() and "HTTP 500" in out.getvalue()
        assert "pa55word" not in out.getvalue().split("failing since", 1)[1]

        monitor = Monitor.objects.get(project=project, kind="sink_failing")
        monitor.thresholds, monitor.cooldown_minutes = {"minutes": 5}, 30
        monitor.save()
        assert monitor_run(monitor, project, timezone.now()) == (0, 0), "not for 5 minutes yet"
        later = timezone.now() + timedelta(minutes=6)
        assert monitor_run(monitor, project, later) == (1, 0)
        assert monitor_run(monitor, project, later) == (0, 0), "one alert while it fails"
        alert = Alert.objects.get(monitor=monitor, resolved_at=None)
        assert alert.subject == "sink hook" and "HTTP 500" in alert.message and "pa55word" not in alert.message
        assert "pa55word" not in alert.message + json.dumps(alert.evidence)
        assert project_health(project.id)["status"] == "failing"

        receiver.refusing = False
        SinkDelivery.objects.filter(sink=sink).update(next_at=timezone.now())
        assert sink_deliver(sink.id) == 2
    assert admin_client.get(f"/api/sinks/{sink.id}/").json()["failing_since"] is None
    assert monitor_run(monitor, project, later + timedelta(minutes=1)) == (0, 1), "recovered"
