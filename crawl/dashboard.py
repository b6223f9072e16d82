"""The live dashboard (/admin/dashboard/): one project's counts, fetch rates, work owed, errors and
throughput. crawl/static/crawl/dashboard.js polls the JSON endpoint every 2 s to refresh it.

Every query is bounded on big tables: counts by state use the (project, state) index, the rate
windows and the chart the (project, fetched_at) index, the error lists only the failed rows.
"""

from datetime import datetime, timedelta

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q
from django.db.models.functions import TruncMinute
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.text import Truncator

from crawl.models import Page, Project
from crawl.selectors import broker_queue_lengths, project_errors, project_progress, stage_backlog
from media.models import MediaAsset

WINDOWS = {"5m": 5, "1h": 60, "1d": 24 * 60}  # minutes, as pyspider shows them
CHART_MINUTES = 60
TOP = 20


def dashboard_view(request: HttpRequest) -> HttpResponse:
    _check_permission(request)
    project = _chosen_project(request)
    context = {
        **admin.site.each_context(request),
        "title": "Crawl dashboard",
        "projects": Project.objects.order_by("name").only("id", "name"),
        "project": project,
        "snapshot": dashboard_snapshot(project) if project else None,
        "page_states": Page.State.values,
        "asset_states": MediaAsset.State.values,
        "windows": list(WINDOWS),
    }
    return render(request, "crawl/dashboard.html", context)


def dashboard_data(request: HttpRequest) -> JsonResponse:
    """?project=<id>: the snapshot the page shows, as JSON."""
    _check_permission(request)
    project = _chosen_project(request)
    if project is None:
        return JsonResponse({"error": "no such project"}, status=404)
    return JsonResponse(dashboard_snapshot(project))


def _check_permission(request: HttpRequest) -> None:
    if not request.user.has_perm("crawl.view_project"):
        raise PermissionDenied


def _chosen_project(request: HttpRequest) -> Project | None:
    """?project=<id>, or the newest project when none is asked for."""
    ref = request.GET.get("project", "")
    if ref:
        return Project.objects.filter(id=int(ref)).first() if ref.isdigit() else None
    return Project.objects.order_by("-created_at", "-id").first()


def dashboard_snapshot(project: Project, now: datetime | None = None) -> dict:
    now = now or timezone.now()
    progress = project_progress(project)
    return {
        "project": {"id": project.id, "name": project.name, "slug": project.slug, "status": project.status},
        "generated_at": now.isoformat(),
        "pages": {state: progress["pages"].get(state, 0) for state in Page.State.values},
        "assets": {state: progress["assets"].get(state, 0) for state in MediaAsset.State.values},
        "pending": progress["pending"],
        "rates": fetch_rates(project, now),
        "backlog": stage_backlog(project),
        "queues": broker_queue_lengths(),
        "errors_by_code": list(project_errors(project).items())[:TOP],
        "errors_by_host": errors_by_host(project),
        "recent_failures": recent_failures(project),
        "throughput": throughput(project, now),
    }


def fetch_rates(project: Project, now: datetime) -> dict[str, dict]:
    """Pages fetched in the last 5 minutes, hour and day (one query), and the rate per minute."""
    since = {name: now - timedelta(minutes=minutes) for name, minutes in WINDOWS.items()}
    counts = Page.objects.filter(project=project, fetched_at__gte=since["1d"]).aggregate(
        **{name: Count("id", filter=Q(fetched_at__gte=start)) for name, start in since.items()}
    )
    return {
        name: {"pages": counts[name], "per_minute": round(counts[name] / minutes, 2)}
        for name, minutes in WINDOWS.items()
    }


def errors_by_host(project: Project) -> list[tuple[str, int]]:
    failed = Page.objects.filter(project=project, state=Page.State.FAILED)
    rows = failed.values("host").annotate(n=Count("id")).order_by("-n", "host")[:TOP]
    return [(row["host"], row["n"]) for row in rows]


def recent_failures(project: Project) -> list[dict]:
    failed = Page.objects.filter(project=project, state=Page.State.FAILED).order_by("-updated_at", "-id")
    rows = failed.values("id", "url", "error_code", "error_message", "status_code", "updated_at")[:TOP]
    return [
        row
        | {
            "error_message": Truncator(row["error_message"]).chars(300),
            "updated_at": row["updated_at"].isoformat(),
            "admin_url": reverse("admin:crawl_page_change", args=[row["id"]]),
        }
        for row in rows
    ]


def throughput(project: Project, now: datetime) -> list[dict]:
    """Pages fetched per minute over the last CHART_MINUTES minutes, oldest first, quiet minutes as 0."""
    first = now.replace(second=0, microsecond=0) - timedelta(minutes=CHART_MINUTES - 1)
    rows = (
        Page.objects.filter(project=project, fetched_at__gte=first)
        .annotate(minute=TruncMinute("fetched_at"))
        .values("minute")
        .annotate(n=Count("id"))
    )
    per_minute = {row["minute"]: row["n"] for row in rows}
    minutes = (first + timedelta(minutes=i) for i in range(CHART_MINUTES))
    return [{"minute": m.isoformat(), "pages": per_minute.get(m, 0)} for m in minutes]
