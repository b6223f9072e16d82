"""The live dashboard (/admin/dashboard/). Its first screen is the overview: every project with its
current job, state, rate, owed work and last error, with Start / Pause / Resume / Cancel, and the
workers alive with the queues they consume (and a warning for work no worker will take). With
?project=<id> it is one project's counts, fetch rates, work owed, errors and throughput.
console/static/console/dashboard.js polls the JSON endpoints every 2 s to refresh both.

Every query is bounded on big tables: counts by state use the (project, state) index, the rate
windows the (project, fetched_at) index, the chart the health counters, the error lists only the
rows in error (failed, or waiting to retry).

Each user sees the projects they may (console/access/policy.py); the buttons are for those who may run them.
"""

from collections import defaultdict
from datetime import datetime, timedelta

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Count, OuterRef, Q, Subquery
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.text import Truncator
from django.views.decorators.http import require_POST

from console.access.policy import may, projects_for
from console.health.counters import counters_by_bucket, health_chart, project_health, projects_health
from console.models import Job
from console.runs import jobs, steering
from console.runs.workers import jobs_open, pipeline_warnings, stage_warnings, workers_alive, workers_snapshot
from console.selectors import (
    broker_queue_lengths,
    errors_grouped,
    hosts_blocked,
    pages_in_error,
    pages_retrying,
    project_progress,
    stage_backlog,
)
from crawl.frontier.stages import ASSET_PENDING_STATES, FETCH, PAGE_PENDING_STATES
from crawl.hosts.backoff import hosts_slowed
from crawl.models import MediaAsset, Page, Project

WINDOWS = {"5m": 5, "1h": 60, "1d": 24 * 60}  # minutes, as pyspider shows them
CHART_MINUTES = 60
HOUR = timedelta(hours=1)
TOP = 20


def dashboard_view(request: HttpRequest) -> HttpResponse:
    _check_permission(request)
    if not request.GET.get("project"):
        context = {
            **admin.site.each_context(request),
            "title": "Crawl overview",
            "overview": overview_snapshot(projects=projects_for(request.user), steers=may(request.user, "run")),
        }
        return render(request, "console/overview.html", context)
    project = _chosen_project(request)
    context = {
        **admin.site.each_context(request),
        "title": "Crawl dashboard",
        "projects": projects_for(request.user).order_by("name").only("id", "name"),
        "project": project,
        "snapshot": dashboard_snapshot(project) if project else None,
        "health": project_health(project.id) if project else None,
        "health_chart": health_chart(project.id) if project else "",
        "page_states": Page.State.values,
        "asset_states": MediaAsset.State.values,
        "windows": list(WINDOWS),
    }
    return render(request, "console/dashboard.html", context)


def dashboard_data(request: HttpRequest) -> JsonResponse:
    """?project=<id>: the snapshot the page shows, as JSON."""
    _check_permission(request)
    project = _chosen_project(request)
    if project is None:
        return JsonResponse({"error": "no such project"}, status=404)
    return JsonResponse(dashboard_snapshot(project))


def overview_data(request: HttpRequest) -> JsonResponse:
    _check_permission(request)
    return JsonResponse(overview_snapshot(projects=projects_for(request.user), steers=may(request.user, "run")))


@require_POST
def overview_control(request: HttpRequest) -> JsonResponse:
    """POST project=<id>&action=start|recrawl_due|recrawl|pause|resume|cancel: the overview's buttons
    (the run permission; another team's project is as unknown as a missing one). Start on a project
    with nothing left to crawl is a 409 offering the two recrawls."""
    if not may(request.user, "run"):
        raise PermissionDenied
    ref, action = request.POST.get("project", ""), request.POST.get("action", "")
    project = projects_for(request.user).filter(id=int(ref)).first() if ref.isascii() and ref.isdigit() else None
    if project is None or action not in (*STARTS, *steering.STEERS):
        return JsonResponse({"error": f"project=<id> and action={'|'.join((*STARTS, *steering.STEERS))}"}, status=400)
    if action in STARTS:
        try:
            job, _queued = STARTS[action](project=project, trigger=Job.Trigger.ADMIN, user=request.user)
        except steering.ProjectFinished as finished:
            return JsonResponse({"ok": False, "error": str(finished), "offer": finished.OFFER}, status=409)
    elif (job := jobs.job_current(project)) and not steering.job_steer(job=job, action=action, user=request.user):
        job = None
    if not job:
        return JsonResponse(
            {"ok": False, "error": f"{action}: no job of {project} in a state that allows it"}, status=409
        )
    return JsonResponse({"ok": True, "job": job.id, "state": Job.objects.get(id=job.id).state})


STARTS = {"start": steering.crawl_start, "recrawl_due": jobs.crawl_recrawl_due, "recrawl": jobs.crawl_recrawl}


def _check_permission(request: HttpRequest) -> None:
    if not may(request.user, "view"):
        raise PermissionDenied


def _chosen_project(request: HttpRequest) -> Project | None:
    """?project=<id>, or the newest project when none is asked for (of those the user may see)."""
    ref, projects = request.GET.get("project", ""), projects_for(request.user)
    if ref:
        return projects.filter(id=int(ref)).first() if ref.isascii() and ref.isdigit() else None
    return projects.order_by("-created_at", "-id").first()


def overview_snapshot(now: datetime | None = None, *, projects=None, steers: bool = True) -> dict:
    """Every project (or those of `projects`) in a few grouped queries (not a few per project): its
    current job, owed work, pages fetched in the last 5 minutes and last error; the live workers; the
    warnings. Without `steers` no row offers a button."""
    now = now or timezone.now()
    last_failed = Page.objects.filter(project=OuterRef("pk"), state=Page.State.FAILED).order_by("-updated_at")
    seen = projects  # the warnings count the work of these only: another team's backlog is its own
    projects = (
        (Project.objects.all() if projects is None else projects)
        .order_by("name")
        .annotate(
            last_error_code=Subquery(last_failed.values("error_code")[:1]),
            last_error_url=Subquery(last_failed.values("url")[:1]),
        )
    )
    owed_pages = _by_project(Page.objects.filter(state__in=PAGE_PENDING_STATES))
    owed_assets = _by_project(MediaAsset.objects.filter(state__in=ASSET_PENDING_STATES))
    retrying = pages_retrying(project=None)
    recent = _by_project(Page.objects.filter(fetched_at__gte=now - timedelta(minutes=5)))
    current = {j.id: j for j in Job.objects.filter(state__in=Job.ACTIVE_STATES)}
    last = {job.project_id: job for job in _last_jobs()}
    health = projects_health([p.id for p in projects])
    rows = []
    for p in projects:
        job = current.get(p.job_id) or last.get(p.id)
        rows.append(
            {
                "id": p.id,
                "name": p.name,
                "slug": p.slug,
                "status": p.status,
                "health": health[p.id],
                "url": reverse("admin-dashboard") + f"?project={p.id}",
                "job": _job_json(job),
                "owed": owed_pages.get(p.id, 0) + owed_assets.get(p.id, 0),
                "retrying": [_retrying_json(row) for row in retrying.get(p.id, [])],
                "per_minute": round(recent.get(p.id, 0) / 5, 1),
                "last_error": {"code": p.last_error_code, "url": p.last_error_url} if p.last_error_code else None,
                "actions": _actions(current.get(p.job_id)) if steers else [],
            }
        )
    workers, backlog = workers_alive(), stage_backlog(projects=seen)
    return {
        "generated_at": now.isoformat(),
        "projects": rows,
        "workers": workers_snapshot(),
        "warnings": pipeline_warnings(backlog, workers=workers, job_open=jobs_open(seen))
        + stage_warnings(_render_backlog(seen), rendered=True, workers=workers),
    }


def _retrying_json(row: dict) -> dict:
    """A group of pages waiting out a back-off: its code, count, a message and when the next is due."""
    message = Truncator(row["message"]).chars(200)
    return {"code": row["code"], "pages": row["pages"], "message": message, "next_at": row["next_at"].isoformat()}


def _by_project(rows) -> dict[int, int]:
    return dict(rows.values_list("project_id").annotate(n=Count("id")).order_by())


def _last_jobs():
    """The newest ended job of each project."""
    newest = Job.objects.filter(project=OuterRef("project_id")).exclude(state__in=Job.ACTIVE_STATES).order_by("-id")
    return Job.objects.filter(id=Subquery(newest.values("id")[:1]))


def _render_backlog(projects=None) -> dict[str, int]:
    queued = Page.objects.filter(state=Page.State.QUEUED, project__render_js=True)
    return {FETCH: (queued if projects is None else queued.filter(project__in=projects)).count()}


def _job_json(job: Job | None) -> dict | None:
    if job is None:
        return None
    counts = jobs.job_counts(job)
    return {
        "id": job.id,
        "state": jobs.job_observed(job)[0],
        "kind": job.kind,
        "url": reverse("admin:console_job_change", args=[job.id]),
        "pages_done": counts["pages_done"],
        "pages_failed": counts["pages_failed"],
        "pages_per_second": counts["pages_per_second"],
        "message": job.message,
    }


def _actions(job: Job | None) -> list[str]:
    return ["start"] if job is None else steering.job_actions(job)


def dashboard_snapshot(project: Project, now: datetime | None = None) -> dict:
    now = now or timezone.now()
    progress = project_progress(project)
    backlog, job = stage_backlog(project), jobs.job_current(project)
    job_open = job is not None and job.state in (Job.State.QUEUED, Job.State.RUNNING)
    return {
        "project": {"id": project.id, "name": project.name, "slug": project.slug, "status": project.status},
        "job": _job_json(job),
        "warnings": pipeline_warnings(backlog, rendered=project.render_js, job_open=job_open),
        "generated_at": now.isoformat(),
        "pages": {state: progress["pages"].get(state, 0) for state in Page.State.values},
        "assets": {state: progress["assets"].get(state, 0) for state in MediaAsset.State.values},
        "pending": progress["pending"],
        "retrying": [_retrying_json(row) for row in progress["retrying"]],
        "slow_hosts": hosts_slowed(project_id=project.id, now=now),
        "rates": fetch_rates(project, now),
        "backlog": backlog,
        "queues": broker_queue_lengths(),
        "errors_by_code": errors_grouped(project, "error_code", top=TOP),
        "errors_by_host": errors_grouped(project, "host", top=TOP),
        "recent_failures": recent_failures(project),
        "blocked": [row | {"seen_at": row["seen_at"].isoformat()} for row in hosts_blocked(project, now - HOUR)],
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


def recent_failures(project: Project) -> list[dict]:
    """The latest pages in error, failed or waiting to retry (`retrying`: when the next try is due)."""
    rows = pages_in_error(project).order_by("-updated_at", "-id")
    fields = ("id", "url", "state", "error_code", "error_message", "status_code", "updated_at", "next_fetch_at")
    return [_failure_json(row) for row in rows.values(*fields)[:TOP]]


def _failure_json(row: dict) -> dict:
    retrying = row.pop("state") != Page.State.FAILED
    due = row.pop("next_fetch_at")
    return row | {
        "error_message": Truncator(row["error_message"]).chars(300),
        "updated_at": row["updated_at"].isoformat(),
        "retrying": due.isoformat() if retrying and due else ("now" if retrying else None),
        "admin_url": reverse("admin:crawl_page_change", args=[row["id"]]),
    }


FAILED_FETCHES = ("fetch_failed", "fetch_other", "fetch_backoff", "fetch_blocked")


def throughput(project: Project, now: datetime) -> list[dict]:
    """Fetches per minute over the last CHART_MINUTES minutes, oldest first, quiet minutes as 0:
    `pages` answered (a 304 too), `failed` not (errors, retries, a host that asked us to wait, a
    block page).
    From the health counters, which count every fetch (a page's row keeps only its last)."""
    first = now.replace(second=0, microsecond=0) - timedelta(minutes=CHART_MINUTES - 1)
    answered: dict[datetime, int] = defaultdict(int)
    failed: dict[datetime, int] = defaultdict(int)
    for bucket, counts in counters_by_bucket(project.id, first, scope="project").items():
        minute = bucket.replace(second=0, microsecond=0)
        answered[minute] += counts.get(("", "fetch_ok"), 0)
        failed[minute] += sum(counts.get(("", metric), 0) for metric in FAILED_FETCHES)
    minutes = (first + timedelta(minutes=i) for i in range(CHART_MINUTES))
    return [{"minute": m.isoformat(), "pages": answered[m], "failed": failed[m]} for m in minutes]
