"""Health per project, host and rule set, from the rolling counters the pipeline adds to
(crawl/health.py -> HealthCounter rows, one per metric and time bucket), and the project's state
as the overview shows it: ok, warning or failing, with the reason (its open alerts)."""

from collections import Counter, defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q, Sum
from django.dispatch import receiver
from django.utils import timezone

from console.health.models import Alert, HealthCounter, Monitor
from core.batchsql import upsert_add
from crawl.health import health_counted

# The fetches that got an answer or failed; a host's "wait" (fetch_backoff) is neither.
ANSWERED = ("fetch_ok", "fetch_failed", "fetch_other", "fetch_blocked")
FAILING_KINDS = (
    Monitor.Kind.SITE_DOWN,
    Monitor.Kind.TEMPLATE_CHANGED,
    Monitor.Kind.JOB_FAILED,
    Monitor.Kind.NO_WORKER,
    Monitor.Kind.SINK_FAILING,
)


def bucket_of(moment: datetime) -> datetime:
    """The start of the counters' time bucket holding `moment`."""
    size = settings.CONSOLE_HEALTH_BUCKET_SECONDS
    return datetime.fromtimestamp(int(moment.timestamp()) // size * size, tz=moment.tzinfo)


@receiver(health_counted, dispatch_uid="console.health_counted")
def counters_add(sender, project_id: int, counts: Counter, **kwargs) -> None:
    """Add one batch's counts to the current bucket's counters (one statement)."""
    bucket = bucket_of(timezone.now())
    rows = [
        HealthCounter(project_id=project_id, scope=scope, key=key[:255], metric=metric[:120], bucket=bucket, value=n)
        for (scope, key, metric), n in sorted(counts.items())
    ]
    upsert_add(
        HealthCounter, rows, conflict_fields=("project", "scope", "key", "metric", "bucket"), add_fields=("value",)
    )


def counters_since(
    project_id: int, since: datetime, *, scope: str | None = None, whole: bool = False
) -> dict[tuple, int]:
    """(scope, key, metric) -> sum of the project's counters from `since` on: from the bucket
    holding it, or with `whole` only the buckets that start at `since` or later (a window that
    never looks back further than it says)."""
    rows = HealthCounter.objects.filter(project_id=project_id, bucket__gte=since if whole else bucket_of(since))
    if scope is not None:
        rows = rows.filter(scope=scope)
    sums = rows.values_list("scope", "key", "metric").annotate(n=Sum("value")).order_by()
    return {(s, k, m): n for s, k, m, n in sums}


def counters_by_bucket(project_id: int, since: datetime, *, scope: str) -> dict[datetime, dict[tuple, int]]:
    """bucket -> {(key, metric): value}, the project's counters of one scope from `since` on."""
    out: dict[datetime, dict[tuple, int]] = defaultdict(dict)
    rows = HealthCounter.objects.filter(project_id=project_id, scope=scope, bucket__gte=bucket_of(since))
    for bucket, key, metric, value in rows.values_list("bucket", "key", "metric", "value"):
        out[bucket][(key, metric)] = value
    return dict(out)


def ratio(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole else None


def health_figures(project_id: int, *, hours: float = 1.0) -> dict:
    """The project's figures over the last `hours`: fetch success rate (a block page is no success),
    blocked answers, errors by code, items per page and watched-field coverage per rule set, new and
    changed items; and the same per host."""
    sums = counters_since(project_id, timezone.now() - timedelta(hours=hours))
    project = {m: n for (s, _k, m), n in sums.items() if s == "project"}
    fetched = sum(project.get(m, 0) for m in ANSWERED)
    return {
        "hours": hours,
        "fetches": fetched,
        "fetch_success_rate": ratio(project.get("fetch_ok", 0), fetched),
        "backoffs": project.get("fetch_backoff", 0),
        "blocked": project.get("fetch_blocked", 0),
        "errors_by_code": {m[6:]: n for m, n in sorted(project.items()) if m.startswith("error:")},
        "pages_extracted": project.get("pages_extracted", 0),
        "new_items": project.get("new_items", 0),
        "changed_items": project.get("changed_items", 0),
        "hosts": _hosts(sums),
        "rule_sets": _rule_sets(sums),
    }


def _hosts(sums: dict) -> dict:
    hosts: dict[str, Counter] = defaultdict(Counter)
    for (scope, key, metric), n in sums.items():
        if scope == "host":
            hosts[key][metric] += n
    return {
        host: {
            "fetches": (done := sum(c[m] for m in ANSWERED)),
            "fetch_success_rate": ratio(c["fetch_ok"], done),
            "backoffs": c["fetch_backoff"],
            "blocked": c["fetch_blocked"],
            "errors_by_code": {m[6:]: n for m, n in sorted(c.items()) if m.startswith("error:")},
        }
        for host, c in sorted(hosts.items())
    }


def _rule_sets(sums: dict) -> dict:
    kinds: dict[str, Counter] = defaultdict(Counter)
    for (scope, key, metric), n in sums.items():
        if scope == "rules":
            kinds[key][metric] += n
    return {
        kind: {
            "pages": c["pages"],
            "items": c["items"],
            "items_per_page": ratio(c["items"], c["pages"]),
            "field_coverage": {m[6:]: ratio(n, c["items"]) for m, n in sorted(c.items()) if m.startswith("field:")},
        }
        for kind, c in sorted(kinds.items())
    }


def project_health(project_id: int, open_alerts: list[Alert] | None = None) -> dict:
    """ok, warning or failing, with the reason: the worst of the project's open alerts."""
    if open_alerts is None:
        open_alerts = list(Alert.objects.filter(project_id=project_id, resolved_at=None).select_related("monitor"))
    if not open_alerts:
        return {"status": "ok", "reason": "", "alerts": 0}
    failing = [a for a in open_alerts if a.monitor.kind in FAILING_KINDS]
    worst = sorted(failing or open_alerts, key=lambda a: a.since)[0]
    return {"status": "failing" if failing else "warning", "reason": worst.message, "alerts": len(open_alerts)}


def projects_health(project_ids: list[int]) -> dict[int, dict]:
    """project_health of many projects in one query."""
    alerts = defaultdict(list)
    for alert in Alert.objects.filter(project_id__in=project_ids, resolved_at=None).select_related("monitor"):
        alerts[alert.project_id].append(alert)
    return {pid: project_health(pid, alerts.get(pid, [])) for pid in project_ids}


def counters_prune(*, now: datetime | None = None, batch: int = 5000) -> int:
    """Drop counters older than CONSOLE_HEALTH_KEEP_DAYS, a batch at a time."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.CONSOLE_HEALTH_KEEP_DAYS)
    ids = list(HealthCounter.objects.filter(bucket__lt=cutoff).values_list("id", flat=True)[:batch])
    return HealthCounter.objects.filter(id__in=ids).delete()[0] if ids else 0


CHART_STEPS = 48


def health_chart(project_id: int, *, hours: float = 24.0, now: datetime | None = None) -> str:
    """The project's health chart (console/health/chart.py) over the last `hours`, starting at its
    first counter when that is later (a young project fills the picture)."""
    from console.health.chart import Band, chart_svg

    now = now or timezone.now()
    since = now - timedelta(hours=hours)
    first = HealthCounter.objects.filter(project_id=project_id, bucket__gte=bucket_of(since)).order_by("bucket")
    start = min(getattr(first.first(), "bucket", now), now - timedelta(minutes=1))
    alerts = Alert.objects.filter(project_id=project_id).filter(Q(resolved_at=None) | Q(resolved_at__gte=start))
    bands = [
        Band(a.since, a.resolved_at, a.monitor.kind, f"{a.monitor.get_kind_display()}: {a.subject}")
        for a in alerts.select_related("monitor").order_by("since")
    ]
    return chart_svg(health_steps(project_id, start, now), bands, start, now)


def health_steps(project_id: int, start: datetime, end: datetime, steps: int = CHART_STEPS) -> list[dict]:
    """Per step: the share of fetches answered, and the lowest watched-field coverage of any rule set."""
    size = max((end - start).total_seconds() / steps, settings.CONSOLE_HEALTH_BUCKET_SECONDS)
    sums: dict[int, Counter] = defaultdict(Counter)
    rows = HealthCounter.objects.filter(
        project_id=project_id, bucket__gte=bucket_of(start), scope__in=("project", "rules")
    )
    for bucket, scope, key, metric, value in rows.values_list("bucket", "scope", "key", "metric", "value"):
        index = min(int((bucket - start).total_seconds() // size), steps - 1)
        sums[max(index, 0)][(scope, key, metric)] += value
    return [_step(start + timedelta(seconds=(i + 0.5) * size), sums.get(i, Counter())) for i in range(steps)]


def _step(at: datetime, c: Counter) -> dict:
    fetched = sum(c[("project", "", m)] for m in ANSWERED)
    kinds = {k for (s, k, _m) in c if s == "rules"}
    coverages = [
        c[(s, k, m)] / c[("rules", k, "items")]
        for (s, k, m) in c
        if s == "rules" and m.startswith("field:") and c[("rules", k, "items")]
    ]
    return {
        "at": at,
        "fetch_rate": ratio(c[("project", "", "fetch_ok")], fetched),
        "coverage": min(coverages) if coverages else (0.0 if any(c[("rules", k, "pages")] for k in kinds) else None),
    }
