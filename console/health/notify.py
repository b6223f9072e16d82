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

from console.health.models import Alert, HeldNotice, NotificationTarget
from console.health.quiet import notice_hold, quiet_end
from console.masking import MASK, masked_webhook_url
from crawl.models import Project

log = logging.getLogger("crawlhub.notify")


def targets_of(project: Project | None) -> list[str]:
    """The Apprise URLs of a project's alerts: its own targets, the site-wide rows and setting."""
    return [row.url for row in target_rows(project)] + list(settings.CONSOLE_NOTIFY_URLS)


def target_rows(project: Project | None) -> list[NotificationTarget]:
    """The enabled target rows that hear of a project (its own and the site-wide ones)."""
    rows = NotificationTarget.objects.filter(enabled=True)
    rows = rows.filter(Q(project=project) | Q(project=None)) if project else rows.filter(project=None)
    return list(rows.order_by("id"))


def deliver(*, project: Project | None, title: str, body: str, kind: str, urgent: bool, now=None) -> list[str]:
    """Tell the project's targets now, except the targets in their quiet hours when the message is
    not urgent: those are held until the hours end (console/health/quiet.py). Returns the problems."""
    now, urls = now or timezone.now(), []
    for row in target_rows(project):
        until = None if urgent else quiet_end(row, now)
        if until is None:
            urls.append(row.url)
        else:
            notice_hold(row, title=title, body=body, kind=kind, until=until)
    return send(urls=[*urls, *settings.CONSOLE_NOTIFY_URLS], title=title, body=body, kind=kind)


def console_url(project: Project) -> str:
    return f"{settings.CONSOLE_BASE_URL.rstrip('/')}/admin/dashboard/?project={project.id}"


def duration_text(seconds: float) -> str:
    """A span as people say it: 45 seconds, 1 minute, 2 h 5 min."""
    seconds = max(round(seconds), 0)
    if seconds < 60:
        return f"{seconds} second{'' if seconds == 1 else 's'}"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} minute{'' if minutes == 1 else 's'}"
    return f"{minutes // 60} h {minutes % 60} min" if minutes % 60 else f"{minutes // 60} h"


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
    """An alert's message: its figures when it fires; when it recovers, how long it lasted and what
    it was about, without the failing figures again (they are the firing message's)."""
    project, monitor = alert.project, alert.monitor.title
    since = f"{alert.since:%Y-%m-%d %H:%M:%S} UTC"
    if recovered:
        lasted = duration_text((alert.resolved_at - alert.since).total_seconds())
        title = f"[crawlhub] recovered: {project.name}: {monitor} ({alert.subject})"
        body = (
            f"{project.name}: {alert.subject} is back to normal after {lasted} "
            f"(from {since} to {alert.resolved_at:%H:%M:%S} UTC).\n\nProject: {project.name}\nMonitor: {monitor}\n"
        )
        return title, f"{body}\n{console_url(project)}"
    title = f"[crawlhub] {project.name}: {monitor} ({alert.subject})"
    evidence = "\n".join(f"- {k}: {v}" for k, v in alert.evidence.items() if v not in ("", None, [], {}))
    body = f"{alert.message}\n\nProject: {project.name}\nMonitor: {monitor}\nSince: {since}\n"
    return title, f"{body}{evidence}\n\n{console_url(project)}"


def alerts_announce(*, now: datetime | None = None) -> int:
    """Announce the alerts due: the new ones past their cooldown, and the recoveries of announced
    ones. Each is claimed by a conditional UPDATE first, so two ticks never send one twice."""
    now, sent = now or timezone.now(), 0
    due = Alert.objects.filter(resolved_at=None, notified_at=None, notify_after__lte=now)
    for alert in due.select_related("project", "monitor"):
        if Alert.objects.filter(id=alert.id, notified_at=None).update(notified_at=now):
            sent += _announce(alert, recovered=False, now=now)
    back = Alert.objects.filter(resolved_at__isnull=False, notified_at__isnull=False, recovery_notified_at=None)
    for alert in back.select_related("project", "monitor"):
        if Alert.objects.filter(id=alert.id, recovery_notified_at=None).update(recovery_notified_at=now):
            sent += _announce(alert, recovered=True, now=now)
    return sent


def _announce(alert: Alert, *, recovered: bool, now: datetime) -> int:
    title, body = alert_text(alert, recovered=recovered)
    kind = "success" if recovered else "failure"
    problems = deliver(project=alert.project, title=title, body=body, kind=kind, urgent=alert.monitor.urgent, now=now)
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


def held_send(*, now: datetime | None = None) -> int:
    """Send the held messages whose quiet hours are over, each once: a row is claimed by deleting it."""
    now, sent = now or timezone.now(), 0
    for notice in HeldNotice.objects.filter(send_after__lte=now).select_related("target"):
        if HeldNotice.objects.filter(id=notice.id).delete()[0]:
            send(urls=[notice.target.url], title=notice.title, body=notice.body, kind=notice.kind, email=False)
            sent += 1
    return sent
