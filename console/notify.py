"""Alerts told where the team is: each project's Apprise targets (and the site-wide ones: rows
without a project, and CONSOLE_NOTIFY_URLS), plus Django's own email to ADMINS when
CONSOLE_NOTIFY_ADMINS is on. A message names the project, the monitor, the evidence and links
back to the console (CONSOLE_BASE_URL).

Targets are set by admins only (the change_network_settings permission): messages go from the
workers straight to these addresses, not through the crawl's egress guard, so an intranet chat
server or a mail relay on the private network can be one."""

import logging
from datetime import datetime

import apprise
from django.conf import settings
from django.core.mail import mail_admins
from django.db.models import Q
from django.utils import timezone

from console.health_models import Alert, NotificationTarget
from console.masking import MASK, masked_webhook_url
from crawl.models import Project

log = logging.getLogger("crawlhub.notify")


def targets_of(project: Project | None) -> list[str]:
    """The Apprise URLs of a project's alerts: its own targets, the site-wide rows and setting."""
    rows = NotificationTarget.objects.filter(enabled=True)
    rows = rows.filter(Q(project=project) | Q(project=None)) if project else rows.filter(project=None)
    return [*rows.values_list("url", flat=True), *settings.CONSOLE_NOTIFY_URLS]


def console_url(project: Project) -> str:
    return f"{settings.CONSOLE_BASE_URL.rstrip('/')}/admin/dashboard/?project={project.id}"


def send(*, urls: list[str], title: str, body: str, kind: str = "info", email: bool = True) -> list[str]:
    """Send to every URL (and to ADMINS by email); returns the problems, one line per refusal."""
    problems = []
    for url in urls:
        sender = apprise.Apprise()
        if not sender.add(url):
            problems.append(f"not an Apprise URL this server can use: {shown_url(url)}")
        elif not sender.notify(title=title, body=body, notify_type=apprise.NotifyType(kind)):
            problems.append(f"{shown_url(url)} refused or was unreachable")
    if email and settings.CONSOLE_NOTIFY_ADMINS and settings.ADMINS:
        try:
            mail_admins(title, body, fail_silently=False)
        except Exception as exc:
            problems.append(f"email to ADMINS failed: {exc!r}")
    for problem in problems:
        log.warning("notification not sent: %s", problem)
    return problems


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a notification target, or None."""
    if apprise.Apprise.instantiate(url.strip()) is not None:
        return None
    scheme = url.split("://", 1)[0] if "://" in url else "no scheme"
    return (
        f"not an Apprise URL this server can use ({scheme}://...): for example slack://T000/B000/XXXX, "
        "mailtos://user:password@smtp.example.com?to=team@example.com or json://host/path"
    )


def shown_url(url: str) -> str:
    """A target without its secrets, for alerts, logs and the admin: Apprise's privacy form (which
    hides the tokens it knows of, a bot's in the host included), then the one masking rule on what
    it keeps: the password, and the path and query, where custom headers (+Authorization=...),
    payload extras (:key=value) and form fields (-key=value) are."""
    parsed = apprise.Apprise.instantiate(url, suppress_exceptions=True)
    if not parsed:
        return url.split(":", 1)[0][:20] + f"://{MASK}"
    return masked_webhook_url(parsed.url(privacy=True))


def alert_text(alert: Alert, *, recovered: bool) -> tuple[str, str]:
    project, monitor = alert.project, alert.monitor.get_kind_display()
    if recovered:
        minutes = (alert.resolved_at - alert.since).total_seconds() / 60
        title = f"[crawlhub] recovered: {project.name}: {monitor} ({alert.subject})"
        lead = f"Recovered after {minutes:.0f} minutes: {alert.message}"
    else:
        title = f"[crawlhub] {project.name}: {monitor} ({alert.subject})"
        lead = alert.message
    evidence = "\n".join(f"- {k}: {v}" for k, v in alert.evidence.items() if v not in ("", None, [], {}))
    body = f"{lead}\n\nProject: {project.name}\nMonitor: {monitor}\nSince: {alert.since:%Y-%m-%d %H:%M:%S} UTC\n"
    return title, f"{body}{evidence}\n\n{console_url(project)}"


def alerts_announce(*, now: datetime | None = None) -> int:
    """Announce the alerts due: the new ones past their cooldown, and the recoveries of announced
    ones. Each is claimed by a conditional UPDATE first, so two ticks never send one twice."""
    now, sent = now or timezone.now(), 0
    due = Alert.objects.filter(resolved_at=None, notified_at=None, notify_after__lte=now)
    for alert in due.select_related("project", "monitor"):
        if Alert.objects.filter(id=alert.id, notified_at=None).update(notified_at=now):
            sent += _announce(alert, recovered=False)
    back = Alert.objects.filter(resolved_at__isnull=False, notified_at__isnull=False, recovery_notified_at=None)
    for alert in back.select_related("project", "monitor"):
        if Alert.objects.filter(id=alert.id, recovery_notified_at=None).update(recovery_notified_at=now):
            sent += _announce(alert, recovered=True)
    return sent


def _announce(alert: Alert, *, recovered: bool) -> int:
    title, body = alert_text(alert, recovered=recovered)
    problems = send(urls=targets_of(alert.project), title=title, body=body, kind="success" if recovered else "failure")
    Alert.objects.filter(id=alert.id).update(notify_error="\n".join(problems)[:4000])
    return 1


def notification_test(*, project: Project | None, urls: list[str] | None = None, email: bool = True) -> list[str]:
    """Send a test message to the project's targets (or to `urls`), and to ADMINS by email when
    `email`; returns the problems."""
    name = project.name if project else "every project"
    body = f"A test notification from crawlhub for {name}: alerts of this project reach this target."
    link = f"\n\n{console_url(project)}" if project else ""
    urls = targets_of(project) if urls is None else urls
    return send(urls=urls, title="[crawlhub] test notification", body=body + link, email=email)
