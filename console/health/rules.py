"""Monitors of the user's own: a rule over the health figures a project already keeps (the rolling
counters, its jobs and items), with a threshold and a window. They run in the monitors' tick like
the built-in ones (console/health/monitors.py) and share their alerts, cooldown and recovery. A new
rule kind is one entry in CHECKS here, and one in RULES of console/health/validators.py: what its
`watch`, threshold and window mean."""

from datetime import datetime, timedelta

from console.health.checks import Finding
from console.health.counters import bucket_of, counters_since
from console.health.models import Monitor
from console.models import Job
from crawl.models import Project
from scrape.models import Item, RuleSet


def _span(project: Project, since: datetime, now: datetime, scope: str) -> tuple[dict, float]:
    """The project's counters from the bucket holding `since`, and the minutes they cover."""
    return counters_since(project.id, since, scope=scope), max((now - bucket_of(since)).total_seconds() / 60, 1e-9)


def items_per_run(project: Project, t: dict, now: datetime, open_alerts: dict) -> dict:
    """The items rule set `watch` made in the project's last ended job, below `threshold`."""
    job = Job.objects.filter(project=project, finished_at__isnull=False).order_by("-finished_at", "-id").first()
    if job is None:
        return {}
    kind = rule_kind(project, t["watch"])
    items = Item.objects.filter(page__job_id=job.id, kind=kind).count()
    subject = f"rule set {t['watch']}"
    if items >= t["threshold"]:
        return {subject: None}
    message = f"{project.name}: job {job.id} made {items} items of rule set {t['watch']}, under {t['threshold']:g}"
    return {subject: Finding(message, {"job": job.id, "items": items, "threshold": t["threshold"]})}


def fill_rate(project: Project, t: dict, now: datetime, open_alerts: dict) -> dict:
    """A watched field (`watch`: rule set.field) found in under `threshold` percent of the rule
    set's items of the last `minutes`."""
    name, _, field = t["watch"].rpartition(".")
    kind = rule_kind(project, name)
    sums, _minutes = _span(project, now - timedelta(minutes=t["minutes"]), now, "rules")
    items, found = sums.get(("rules", kind, "items"), 0), sums.get(("rules", kind, f"field:{field}"), 0)
    subject = f"field {t['watch']}"
    if not items:
        return {}
    rate = 100 * found / items
    if rate >= t["threshold"]:
        return {subject: None}
    message = (
        f"{project.name}: field '{field}' of rule set {name} in {rate:.0f}% of {items} items over the last "
        f"{t['minutes']:g} minutes, under {t['threshold']:g}%"
    )
    return {subject: Finding(message, {"rule_set": name, "field": field, "fill_rate": round(rate, 1), "items": items})}


def errors_per_hour(project: Project, t: dict, now: datetime, open_alerts: dict) -> dict:
    """Errors of code `watch` above `threshold` per hour over the last `minutes`."""
    sums, minutes = _span(project, now - timedelta(minutes=t["minutes"]), now, "project")
    errors = sums.get(("project", "", f"error:{t['watch']}"), 0)
    per_hour = errors * 60 / minutes
    subject = f"errors {t['watch']}"
    if per_hour <= t["threshold"]:
        return {subject: None}
    message = (
        f"{project.name}: {errors} errors {t['watch']} in the last {t['minutes']:g} minutes, "
        f"{per_hour:.0f} per hour, above {t['threshold']:g}"
    )
    return {subject: Finding(message, {"code": t["watch"], "errors": errors, "per_hour": round(per_hour, 1)})}


def pages_per_minute(project: Project, t: dict, now: datetime, open_alerts: dict) -> dict:
    """Fewer than `threshold` pages fetched per minute over the last `minutes` while a job runs
    (and has run that long)."""
    since = now - timedelta(minutes=t["minutes"])
    job = Job.objects.filter(id=project.job_id or 0, state=Job.State.RUNNING).first()
    if job is None or (job.started_at or job.created_at) > since:
        return {"pages": None} if job is None else {}
    sums, minutes = _span(project, since, now, "project")
    pages = sum(sums.get(("project", "", m), 0) for m in ("fetch_ok", "fetch_failed", "fetch_other"))
    rate = pages / minutes
    if rate >= t["threshold"]:
        return {"pages": None}
    message = (
        f"{project.name}: job {job.id} fetched {rate:.1f} pages per minute over the last {t['minutes']:g} "
        f"minutes, under {t['threshold']:g}"
    )
    return {"pages": Finding(message, {"job": job.id, "pages": pages, "per_minute": round(rate, 2)})}


# Each rule kind's check; what its watch, threshold and window mean is in console/health/validators.py.
CHECKS = {
    Monitor.Kind.ITEMS_PER_RUN: items_per_run,
    Monitor.Kind.FILL_RATE: fill_rate,
    Monitor.Kind.ERRORS_PER_HOUR: errors_per_hour,
    Monitor.Kind.PAGES_PER_MINUTE: pages_per_minute,
}


def rule_kind(project: Project, name: str) -> str:
    """The items' kind of the project's rule set `name` (its own, or rule:<name>)."""
    rules = RuleSet.objects.filter(project=project, name=name).first()
    return rules.kind if rules else f"rule:{name}"


def rule_thresholds(monitor: Monitor) -> dict:
    return {"watch": monitor.watch, "threshold": monitor.threshold or 0.0, "minutes": monitor.window_minutes or 60}
