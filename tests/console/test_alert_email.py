"""Acceptance: an alert reaches a real SMTP server on loopback (aiosmtpd) through Django's email
settings (ADMINS, EMAIL_HOST, EMAIL_PORT), naming the project, the monitor and the failing URL."""

import socket
from email import message_from_bytes

import pytest
from aiosmtpd.controller import Controller

from console.health.models import Alert
from console.health.monitors import monitors_tick
from console.health.notify import notification_test
from console.models import Job
from crawl.models import Page, Project

pytestmark = pytest.mark.django_db


class Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd calls it by this name
        self.messages.append((envelope.rcpt_tos, message_from_bytes(envelope.content)))
        return "250 OK"


@pytest.fixture
def smtp(settings):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"  # pytest-django's is in memory
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.ADMINS = [("Operators", "ops@example.com")]
    settings.CONSOLE_NOTIFY_ADMINS = True
    settings.CONSOLE_BASE_URL = "https://crawl.example.com"
    yield inbox
    controller.stop()


def test_a_failed_job_alert_is_emailed_to_the_admins(smtp):
    project = Project.objects.create(name="mailed", slug="mailed")
    job = Job.objects.create(project=project, trigger="admin", state="failed", message="every page failed (1)")
    Page.objects.create(project=project, url="http://a.test/x", url_key="k", host="a.test", state="failed",
                        error_code="http_404", job_id=job.id)  # fmt: skip
    assert monitors_tick()["sent"] == 1
    assert len(smtp.messages) == 1
    recipients, mail = smtp.messages[0]
    assert recipients == ["ops@example.com"]
    assert "mailed" in mail["Subject"] and "job failed" in mail["Subject"]
    body = mail.get_payload(decode=True).decode()
    assert "http://a.test/x" in body and f"https://crawl.example.com/admin/dashboard/?project={project.id}" in body
    assert Alert.objects.get(project=project).notify_error == ""


def test_the_test_notification_reaches_the_admins(smtp):
    project = Project.objects.create(name="tested", slug="tested")
    assert notification_test(project=project) == []
    assert "test notification" in smtp.messages[0][1]["Subject"]


def test_a_target_that_is_no_apprise_url_is_refused_with_the_reason():
    from django.core.exceptions import ValidationError

    from console.health.models import NotificationTarget

    with pytest.raises(ValidationError, match="not an Apprise URL"):
        NotificationTarget(name="typo", url="slak://T000/B000/XXXX").full_clean()
    NotificationTarget(name="team", url="json://127.0.0.1:9/alerts").full_clean()


def test_the_admins_test_button_reaches_a_webhook_and_only_admins_see_targets(admin_client, client, django_user_model):
    from django.contrib.auth.models import Group

    from console.health.models import NotificationTarget
    from tests.alert_receiver import JsonReceiver

    with JsonReceiver() as receiver:
        target = NotificationTarget.objects.create(name="team webhook", url=receiver.apprise_url)
        response = admin_client.post(
            "/admin/console/notificationtarget/",
            {"action": "send_test", "_selected_action": [target.id]},
            follow=True,
        )
    assert "team webhook: test notification sent." in [str(m) for m in response.context["messages"]]
    assert [m["title"] for m in receiver.received] == ["[crawlhub] test notification"]
    operator = django_user_model.objects.create_user("op", password="not-used", is_staff=True)
    operator.groups.add(Group.objects.get(name="operator"))
    client.force_login(operator)
    assert client.get("/admin/console/notificationtarget/").status_code == 403
