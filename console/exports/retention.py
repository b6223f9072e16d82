"""Retention: rows older than their setting's days are deleted, a small batch at a time, by the
control queue's prune task (beat runs it every 5 minutes: crawlproject/settings.py). A setting of 0
keeps those rows forever. Each rule names a model, the date its age is counted from, the setting,
and which rows may go at all (a job still running, a page's newest version and an owed sink record
never do)."""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.apps import apps
from django.conf import settings
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

log = logging.getLogger("crawlhub.retention")
MAX_BATCHES = 20  # per rule and run: one run stays short, the next one goes on


def _finished_jobs(jobs: QuerySet) -> QuerySet:
    from crawl.models import Project

    current = Project.objects.filter(job_id__isnull=False).values("job_id")
    return jobs.exclude(state__in=jobs.model.ACTIVE_STATES).exclude(id__in=current)


def _superseded_versions(versions: QuerySet) -> QuerySet:
    """A page's newest version is its current content (and the base of its next diff): kept."""
    newer = versions.model.objects.filter(page_id=OuterRef("page_id"), id__gt=OuterRef("id"))
    return versions.filter(Exists(newer))


def _delivered(records: QuerySet) -> QuerySet:
    return records.filter(state="done")


@dataclass(frozen=True)
class Rule:
    model: str  # "app_label.Model"
    date_field: str
    setting: str  # days kept; 0: forever
    prunable: Callable[[QuerySet], QuerySet] = lambda rows: rows


# Pruned in this order: a job's log lines go before (and without) the job.
RULES = [
    Rule("console.JobLogEntry", "at", "CONSOLE_KEEP_JOB_LOGS_DAYS"),
    Rule("console.Job", "finished_at", "CONSOLE_KEEP_JOBS_DAYS", _finished_jobs),
    Rule("crawl.PageVersion", "fetched_at", "CONSOLE_KEEP_PAGE_VERSIONS_DAYS", _superseded_versions),
    Rule("sinks.SinkDelivery", "updated_at", "CONSOLE_KEEP_SINK_RECORDS_DAYS", _delivered),
    Rule("console.Alert", "resolved_at", "CONSOLE_KEEP_ALERTS_DAYS", lambda alerts: alerts.exclude(resolved_at=None)),
    Rule("console.DebugRun", "created_at", "CONSOLE_KEEP_DEBUG_RUNS_DAYS"),  # drafts and bodies: a day's work
]


def rule_rows(rule: Rule, *, now=None) -> QuerySet | None:
    """The rows the rule would delete now (None: its setting keeps them forever)."""
    days = getattr(settings, rule.setting)
    if not days:
        return None
    model = apps.get_model(rule.model)
    cutoff = (now or timezone.now()) - timedelta(days=days)
    return rule.prunable(model.objects.filter(**{f"{rule.date_field}__lt": cutoff}))


def prune(*, rules: list[Rule] | None = None, batch: int | None = None, max_batches: int = MAX_BATCHES) -> dict:
    """Delete expired rows, at most `batch` (CONSOLE_PRUNE_BATCH) per statement and `max_batches`
    statements per rule. Returns rows deleted per model (related rows a deletion took along
    included, as Django counts them)."""
    batch = batch or settings.CONSOLE_PRUNE_BATCH
    deleted = {}
    for rule in RULES if rules is None else rules:
        rows = rule_rows(rule)
        if rows is not None:
            deleted[rule.model] = _delete_in_batches(rows, rule.date_field, batch, max_batches)
    if any(deleted.values()):
        log.info("pruned %s", ", ".join(f"{n} {m}" for m, n in deleted.items() if n))
    return deleted


def _delete_in_batches(rows: QuerySet, date_field: str, batch: int, max_batches: int) -> int:
    total = 0
    for _ in range(max_batches):
        ids = list(rows.order_by(date_field, "id").values_list("id", flat=True)[:batch])
        if not ids:
            break
        total += rows.model.objects.filter(id__in=ids).delete()[1].get(rows.model._meta.label, 0)
        if len(ids) < batch:
            break
    return total
