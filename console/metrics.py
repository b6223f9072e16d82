"""Prometheus metrics at GET /metrics, read from the database at scrape time: the rows are the truth,
so every worker process on every machine is counted without a metrics server of its own.

Never public: a scraper sends `Authorization: Bearer <CRAWLHUB_METRICS_TOKEN>` and reads every
project and the queues; a person needs a staff session and reads only the projects they see (the
queues too when they see every project). Host labels are bounded: the TOP_HOSTS busiest hosts of each project, the rest
summed under host="_other".
"""

import hmac
from collections import defaultdict
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, QuerySet, Sum
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeHistogramMetricFamily, GaugeMetricFamily

from console.access.policy import projects_for, sees_all
from console.health.metrics import health_metrics
from console.selectors import broker_queue_lengths, stage_backlog
from crawl.models import MediaAsset, Page, Project

TOP_HOSTS = 20
OTHER_HOSTS = "_other"
# Latencies are read from the rows of the last hour (the rows keep only their latest timings).
WINDOW = timedelta(hours=1)
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)


class CrawlCollector:
    """A custom collector: each scrape runs a few grouped queries and yields the families. `projects`
    narrows them to those projects (and leaves the operator-wide queues out)."""

    def __init__(self, projects: QuerySet | None = None):
        self.projects = projects

    def collect(self):
        slugs = Slugs((self.projects if self.projects is not None else Project.objects).values_list("id", "slug"))
        slugs.scoped = self.projects is not None
        yield from page_metrics(slugs)
        yield from host_metrics(slugs)
        yield from asset_metrics(slugs)
        yield from latency_metrics(slugs)
        yield from health_metrics(slugs)
        if not slugs.scoped:
            yield from queue_metrics()


class Slugs(dict):
    """Project id -> slug of the projects reported; `of` narrows a query of their rows to them."""

    scoped = False

    def of(self, rows: QuerySet) -> QuerySet:
        return rows.filter(project_id__in=list(self)) if self.scoped else rows


def page_metrics(slugs: Slugs):
    by_state = GaugeMetricFamily("crawlhub_pages", "Pages (URLs) by project and state.", labels=["project", "state"])
    for project_id, state, n in (
        slugs.of(Page.objects).values_list("project_id", "state").annotate(n=Count("id")).order_by()
    ):
        by_state.add_metric([slugs.get(project_id, str(project_id)), state], n)
    fetched = GaugeMetricFamily("crawlhub_pages_fetched", "Pages with a fetch answer.", labels=["project"])
    fetches = CounterMetricFamily("crawlhub_fetches", "Fetches done (recrawls and retries count).", labels=["project"])
    size = GaugeMetricFamily("crawlhub_pages_fetched_bytes", "Bytes of the stored page bodies.", labels=["project"])
    totals = (
        slugs.of(Page.objects)
        .values("project_id")
        .annotate(
            fetched=Count("id", filter=Q(fetched_at__isnull=False)),
            fetches=Sum("fetch_count"),
            size=Sum("content_length"),
        )
    )
    for row in totals.order_by():
        project = [slugs.get(row["project_id"], str(row["project_id"]))]
        fetched.add_metric(project, row["fetched"])
        fetches.add_metric(project, row["fetches"] or 0)
        size.add_metric(project, row["size"] or 0)
    failed = GaugeMetricFamily("crawlhub_pages_failed", "Failed pages by error code.", labels=["project", "error_code"])
    failures = slugs.of(Page.objects).filter(state=Page.State.FAILED).values_list("project_id", "error_code")
    for project_id, code, n in failures.annotate(n=Count("id")).order_by():
        failed.add_metric([slugs.get(project_id, str(project_id)), code], n)
    return [by_state, fetched, fetches, size, failed]


def host_metrics(slugs: Slugs):
    """Fetched and failed pages of each project's TOP_HOSTS busiest hosts, the rest as _other."""
    labels = ["project", "host"]
    fetched = GaugeMetricFamily("crawlhub_host_pages_fetched", "Pages with a fetch answer, by host.", labels=labels)
    failed = GaugeMetricFamily("crawlhub_host_pages_failed", "Failed pages, by host.", labels=labels)
    rows = (
        slugs.of(Page.objects)
        .values_list("project_id", "host")
        .annotate(
            fetched=Count("id", filter=Q(fetched_at__isnull=False)),
            failed=Count("id", filter=Q(state=Page.State.FAILED)),
        )
        .filter(Q(fetched__gt=0) | Q(failed__gt=0))
        .order_by("project_id", "-fetched", "host")
    )
    per_project = defaultdict(list)
    for project_id, *host in rows:
        per_project[project_id].append(host)
    for project_id, hosts in per_project.items():
        top, rest = hosts[:TOP_HOSTS], hosts[TOP_HOSTS:]
        if rest:
            top.append((OTHER_HOSTS, sum(h[1] for h in rest), sum(h[2] for h in rest)))
        project = slugs.get(project_id, str(project_id))
        for host, n_fetched, n_failed in top:
            fetched.add_metric([project, host], n_fetched)
            failed.add_metric([project, host], n_failed)
    return [fetched, failed]


def asset_metrics(slugs: Slugs):
    by_state = GaugeMetricFamily("crawlhub_assets", "Media assets by project and state.", labels=["project", "state"])
    rows = (
        slugs.of(MediaAsset.objects)
        .values_list("project_id", "state")
        .annotate(n=Count("id"), size=Sum("size"))
        .order_by()
    )
    size = defaultdict(int)
    for project_id, state, n, state_size in rows:
        by_state.add_metric([slugs.get(project_id, str(project_id)), state], n)
        if state == MediaAsset.State.DONE:
            size[project_id] += state_size or 0
    stored = GaugeMetricFamily("crawlhub_assets_bytes", "Bytes of the downloaded assets.", labels=["project"])
    for project_id, total in size.items():
        stored.add_metric([slugs.get(project_id, str(project_id))], total)
    return [by_state, stored]


def latency_metrics(slugs: Slugs):
    since = timezone.now() - WINDOW
    delay = ExpressionWrapper(F("updated_at") - F("fetched_at"), output_field=DurationField())
    download = ExpressionWrapper(F("downloaded_at") - F("created_at"), output_field=DurationField())
    extracted = (Page.State.EXTRACTED, Page.State.DONE)
    return [
        histogram(
            "crawlhub_fetch_seconds",
            "Fetch durations of the pages fetched in the last hour.",
            Page.objects.filter(fetched_at__gte=since, fetch_ms__isnull=False),
            F("fetch_ms"),
            [round(b * 1000) for b in BUCKETS],
            slugs,
        ),
        histogram(
            "crawlhub_extract_delay_seconds",
            "Fetch to extracted (queue wait included), pages fetched in the last hour.",
            Page.objects.filter(fetched_at__gte=since, state__in=extracted),
            delay,
            [timedelta(seconds=b) for b in BUCKETS],
            slugs,
        ),
        histogram(
            "crawlhub_download_delay_seconds",
            "Discovered to stored (queue wait included), assets downloaded in the last hour.",
            MediaAsset.objects.filter(downloaded_at__gte=since, state=MediaAsset.State.DONE),
            download,
            [timedelta(seconds=b) for b in BUCKETS],
            slugs,
        ),
    ]


def histogram(name: str, doc: str, rows: QuerySet, value, bounds: list, slugs: Slugs):
    """A gauge histogram per project: bucket counts of `value` (milliseconds or a duration) over rows."""
    buckets = {f"le{i}": Count("id", filter=Q(value__lte=bound)) for i, bound in enumerate(bounds)}
    grouped = (
        slugs.of(rows).annotate(value=value).values("project_id").annotate(n=Count("id"), total=Sum("value"), **buckets)
    )
    family = GaugeHistogramMetricFamily(name, doc, labels=["project"])
    for row in grouped.order_by():
        counts = [(str(b), row[f"le{i}"]) for i, b in enumerate(BUCKETS)] + [("+Inf", row["n"])]
        total = row["total"] or 0
        seconds = total.total_seconds() if isinstance(total, timedelta) else total / 1000
        family.add_metric([slugs.get(row["project_id"], str(row["project_id"]))], counts, seconds)
    return family


def queue_metrics():
    backlog = GaugeMetricFamily("crawlhub_stage_backlog", "Work owed per stage, from the rows.", labels=["stage"])
    for stage, n in stage_backlog().items():
        backlog.add_metric([stage], n)
    queued = GaugeMetricFamily("crawlhub_broker_queue_messages", "Messages in each broker queue.", labels=["queue"])
    for queue, n in broker_queue_lengths().items():
        if n is not None:
            queued.add_metric([queue], n)
    return [backlog, queued]


def _by_token(request: HttpRequest) -> bool:
    token = settings.CRAWLHUB_METRICS_TOKEN
    offered = request.headers.get("Authorization", "")
    return bool(token) and hmac.compare_digest(offered.encode(), f"Bearer {token}".encode())


def access_denied(request: HttpRequest) -> HttpResponse | None:
    """None when the request may read the metrics: the bearer token, or a staff session."""
    if _by_token(request):
        return None
    if request.user.is_authenticated and request.user.is_staff:
        return None
    if request.user.is_authenticated:
        return HttpResponse("metrics are for staff users\n", status=403, content_type="text/plain")
    response = HttpResponse("authentication required\n", status=401, content_type="text/plain")
    response["WWW-Authenticate"] = 'Bearer realm="crawlhub metrics"'
    return response


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    denied = access_denied(request)
    if denied is not None:
        return denied
    collector = CrawlCollector(None if _by_token(request) or sees_all(request.user) else projects_for(request.user))
    return HttpResponse(generate_latest(collector), content_type=CONTENT_TYPE_LATEST)


# Included by console/urls.py at "metrics".
urlpatterns = [path("", metrics_view, name="metrics")]
