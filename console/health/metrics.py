"""The health figures as Prometheus families (console/metrics.py yields them): from the rolling
counters of the last hour, in one grouped query, and the open alerts by monitor."""

from collections import Counter, defaultdict
from datetime import timedelta

from django.db.models import Count, Sum
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from console.health.counters import ANSWERED, bucket_of, projects_health
from console.health.models import Alert, HealthCounter

HEALTH_STATES = {"ok": 0, "warning": 1, "failing": 2}


def health_metrics(slugs):
    """slugs: console.metrics.Slugs (project id -> slug, and the rows it may report)."""
    label = slugs.get
    status = GaugeMetricFamily("crawlhub_health_status", "0 ok, 1 warning, 2 failing.", labels=["project"])
    for project_id, health in projects_health(list(slugs)).items():
        status.add_metric([label(project_id, str(project_id))], HEALTH_STATES[health["status"]])
    alerts = GaugeMetricFamily("crawlhub_alerts_open", "Open alerts by monitor.", labels=["project", "monitor"])
    open_rows = slugs.of(Alert.objects).filter(resolved_at=None).values_list("project_id", "monitor__kind")
    for project_id, kind, n in open_rows.annotate(n=Count("id")).order_by():
        alerts.add_metric([label(project_id, str(project_id)), kind], n)
    return [status, alerts, *_rates(slugs)]


def _rates(slugs):
    since = bucket_of(timezone.now() - timedelta(hours=1))
    rows = slugs.of(HealthCounter.objects).filter(bucket__gte=since, scope__in=("project", "rules"))
    sums: dict[int, Counter] = defaultdict(Counter)
    for project_id, scope, key, metric, n in (
        rows.values_list("project_id", "scope", "key", "metric").annotate(n=Sum("value")).order_by()
    ):
        sums[project_id][(scope, key, metric)] = n
    success = GaugeMetricFamily(
        "crawlhub_health_fetch_success_ratio", "Fetches answered, last hour.", labels=["project"]
    )
    per_page = GaugeMetricFamily(
        "crawlhub_health_items_per_page", "Items per page of a rule set, last hour.", labels=["project", "rule_set"]
    )
    coverage = GaugeMetricFamily(
        "crawlhub_health_field_coverage",
        "Share of a rule set's items holding a watched field, last hour.",
        labels=["project", "rule_set", "field"],
    )
    for project_id, c in sums.items():
        project = slugs.get(project_id, str(project_id))
        fetched = sum(c[("project", "", m)] for m in ANSWERED)
        if fetched:
            success.add_metric([project], c[("project", "", "fetch_ok")] / fetched)
        for (scope, key, metric), n in c.items():
            if scope != "rules":
                continue
            if metric == "items" and c[(scope, key, "pages")]:
                per_page.add_metric([project, key], n / c[(scope, key, "pages")])
            elif metric.startswith("field:") and c[(scope, key, "items")]:
                coverage.add_metric([project, key, metric[6:]], n / c[(scope, key, "items")])
    return [success, per_page, coverage]
