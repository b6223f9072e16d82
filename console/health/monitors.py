"""Monitors: every project has each built-in kind (console/health/checks.py), with default thresholds an
operator overrides per project (admin, API). `monitors_tick` (beat, on the control queue) runs
the checks and keeps one Alert row per firing: opened when a condition holds, resolved when it
recovers, each announced once (console/health/notify.py). A condition that comes back within its
monitor's cooldown after recovering opens a new alert that is announced only if it still holds
when the cooldown ends."""

import logging
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from console.health import rules
from console.health.checks import CHECKS as BUILT_IN_CHECKS
from console.health.checks import Finding
from console.health.counters import counters_prune
from console.health.models import Alert, Monitor
from console.health.notify import alerts_announce, held_send
from console.health.validators import DEFAULTS, RULES
from crawl.models import Project

log = logging.getLogger("crawlhub.monitors")

# Built-in kinds announced at once, even in a target's quiet hours; the others wait until they end.
URGENT = {Monitor.Kind.SITE_DOWN, Monitor.Kind.TEMPLATE_CHANGED, Monitor.Kind.JOB_FAILED, Monitor.Kind.NO_WORKER}
# Every kind's check: the built-in ones (checks.py) and the rules of the user's own (rules.py).
CHECKS = {**BUILT_IN_CHECKS, **rules.CHECKS}


def monitor_thresholds(monitor: Monitor) -> dict:
    """The kind's defaults with the monitor's overrides (a rule's own: its watch, threshold, minutes)."""
    if monitor.kind in RULES:
        return rules.rule_thresholds(monitor)
    return DEFAULTS[monitor.kind] | (monitor.thresholds if isinstance(monitor.thresholds, dict) else {})


def monitors_ensure(project_ids: list[int]) -> None:
    """Give each project the built-in monitors it does not have yet, with the defaults."""
    rows = [Monitor(project_id=pid, kind=kind, urgent=kind in URGENT) for pid in project_ids for kind in DEFAULTS]
    Monitor.objects.bulk_create(rows, ignore_conflicts=True)


def monitors_tick(now: datetime | None = None) -> dict[str, int]:
    """Run every enabled monitor of every project; open and resolve alerts,
    then announce what is due. Returns counts for the log."""
    now = now or timezone.now()
    projects = list(Project.objects.all())
    monitors_ensure([p.id for p in projects])
    opened = resolved = 0
    for project in projects:
        for monitor in Monitor.objects.filter(project=project, enabled=True):
            o, r = monitor_run(monitor, project, now)
            opened, resolved = opened + o, resolved + r
    sent = alerts_announce(now=now) + held_send(now=now)
    return {"opened": opened, "resolved": resolved, "sent": sent, "pruned": counters_prune(now=now)}


def monitor_run(monitor: Monitor, project: Project, now: datetime) -> tuple[int, int]:
    """One monitor's check, written as alerts. Returns (opened, resolved)."""
    current = {a.subject: a for a in Alert.objects.filter(monitor=monitor, resolved_at=None)}
    try:
        findings = CHECKS[monitor.kind](project, monitor_thresholds(monitor), now, current)
    except Exception:
        log.exception("monitor %s of project %s failed", monitor.kind, project.id)
        return 0, 0
    opened = resolved = 0
    for subject, finding in findings.items():
        alert = current.get(subject)
        if finding is not None and alert is None:
            opened += alert_open(monitor, subject, finding, now)
        elif finding is not None:
            if alert.notified_at is None:  # once announced, it says what was announced (the figures sent)
                Alert.objects.filter(id=alert.id).update(
                    evidence=finding.evidence | _kept(alert), message=finding.message
                )
        elif alert is not None:
            resolved += Alert.objects.filter(id=alert.id, resolved_at=None).update(resolved_at=now)
    return opened, resolved


def _kept(alert: Alert) -> dict:
    """What an open alert keeps of the evidence it opened with (its baseline)."""
    return {k: v for k, v in alert.evidence.items() if k == "baseline"}


def alert_open(monitor: Monitor, subject: str, finding: Finding, now: datetime) -> int:
    """Open an alert (1), or none (0) when another tick just opened it."""
    last = Alert.objects.filter(monitor=monitor, subject=subject).exclude(resolved_at=None).first()
    quiet_until = last.resolved_at + timedelta(minutes=monitor.cooldown_minutes) if last else now
    try:
        with transaction.atomic():
            Alert.objects.create(
                project_id=monitor.project_id,
                monitor=monitor,
                subject=subject[:300],
                message=finding.message,
                evidence=finding.evidence,
                since=now,
                notify_after=max(now, quiet_until),
            )
    except IntegrityError:  # the partial unique index: it is open already
        return 0
    return 1
