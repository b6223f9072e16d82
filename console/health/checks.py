"""The built-in monitors' checks. Each takes (project, thresholds, now, open alerts by subject) and
answers, per subject it has figures for, a Finding when the condition holds or None when that
subject is healthy; a subject it has no figures for is left as it is (an open alert stays open:
a site nobody fetched is not known to be back)."""

from datetime import datetime, timedelta

from django.db import models
from django.db.models import Sum

from console.health.block_checks import host_blocked
from console.health.counters import bucket_of, counters_by_bucket, counters_since
from console.health.findings import Finding, minutes_text
from console.health.models import HealthCounter, Monitor
from console.health.sink_status import sink_error_masked
from console.models import Job
from console.runs.workers import queues_consumed
from console.selectors import stage_backlog
from crawl.frontier.stages import PAGE_PENDING_STATES
from crawl.models import Host, Page, Project
from crawlproject.queues import FETCH, RENDER, STAGES
from scrape.models import Item
from sinks.delivery import sink_last_error
from sinks.models import Sink

FETCHES = ("fetch_ok", "fetch_failed", "fetch_other", "fetch_backoff", "fetch_blocked")


def _window(thresholds: dict, now: datetime) -> datetime:
    return now - timedelta(minutes=float(thresholds["minutes"]))


def site_down(project: Project, t: dict, now: datetime, open_alerts: dict) -> dict:
    """A host whose fetches all failed (unreachable, timed out, 5xx) for the last `minutes`, at
    least `min_failures` of them; back when its newest fetches answered."""
    per_host: dict[str, dict] = {}
    for (_scope, host, metric), n in counters_since(project.id, _window(t, now), scope="host", whole=True).items():
        per_host.setdefault(host, {}).setdefault(metric, 0)
        per_host[host][metric] += n
    out = {}
    for host, c in per_host.items():
        ok, failed = c.get("fetch_ok", 0), c.get("fetch_failed", 0)
        codes = {m[6:]: n for m, n in c.items() if m.startswith("error:")}
        if not ok and failed >= t["min_failures"]:
            url = _failing_url(project, host)
            out[f"host {host}"] = Finding(
                f"{project.name}: {host} is down: {failed} fetches failed and none answered in the last "
                f"{minutes_text(t['minutes'])} ({', '.join(f'{k} x{v}' for k, v in sorted(codes.items()))})",
                {"host": host, "failed": failed, "errors_by_code": codes, "failing_url": url},
            )
        elif ok and (_newest_ok(project.id, host, now, t) or _answered_again(host, open_alerts.get(f"host {host}"))):
            out[f"host {host}"] = None
    return out


def _answered_again(host: str, alert) -> bool:
    """The open alert's host was down and has answered since it opened, and has not failed since:
    back at once, though the counters' bucket of its return still holds the failures before it."""
    if alert is None:
        return False
    back = Host.objects.filter(host=host, failures=0, down_since__isnull=True, recovered_at__gte=alert.since)
    return back.exists()


def _newest_ok(project_id: int, host: str, now: datetime, t: dict) -> bool:
    """The host's newest bucket with fetches has answers and no failures."""
    buckets = counters_by_bucket(project_id, _window(t, now), scope="host")
    for bucket in sorted(buckets, reverse=True):
        c = {m: n for (k, m), n in buckets[bucket].items() if k == host}
        if any(c.get(m) for m in FETCHES):
            return bool(c.get("fetch_ok")) and not c.get("fetch_failed")
    return False


def _failing_url(project: Project, host: str) -> str:
    page = Page.objects.filter(project=project, host=host).exclude(error_code="").order_by("-updated_at").first()
    return page.url if page else ""


def template_changed(project: Project, t: dict, now: datetime, open_alerts: dict) -> dict:
    """A rule set's items per page, or a watched field's share of its items, far below its own
    baseline: the newest `min_pages` pages against the earlier ones of the last `baseline_hours`."""
    since = bucket_of(now - timedelta(hours=float(t["baseline_hours"])))
    rules = HealthCounter.objects.filter(project_id=project.id, scope="rules", bucket__gte=since)
    out = {}
    for kind in sorted(set(rules.filter(metric="pages").values_list("key", flat=True).distinct())):
        cutoff = _recent_start(rules.filter(key=kind), t["min_pages"])
        if cutoff is None:
            continue
        recent, base = (
            _sums(rules.filter(key=kind, bucket__gte=cutoff)),
            _sums(rules.filter(key=kind, bucket__lt=cutoff)),
        )
        out |= _compare(project, kind, "items", recent, base, t, open_alerts)
        for metric in sorted(m for m in {**recent, **base} if m.startswith("field:")):
            out |= _compare(project, kind, metric, recent, base, t, open_alerts)
    return out


def _recent_start(rows, min_pages: int) -> datetime | None:
    """The oldest bucket of the newest ones that hold min_pages pages (None: fewer pages than that)."""
    seen = 0
    for bucket, pages in rows.filter(metric="pages").order_by("-bucket").values_list("bucket", "value").iterator():
        seen += pages
        if seen >= min_pages:
            return bucket
    return None


def _sums(rows) -> dict[str, int]:
    return {"pages": 0} | dict(rows.values_list("metric").annotate(n=Sum("value")).order_by())


def _share(sums: dict, metric: str) -> float | None:
    whole = sums.get("pages" if metric == "items" else "items", 0)
    return sums.get(metric, 0) / whole if whole else None


def _compare(project, kind: str, metric: str, recent: dict, base: dict, t: dict, open_alerts: dict) -> dict:
    name = kind.removeprefix("rule:")
    what = "items per page" if metric == "items" else f"field '{metric[6:]}'"
    subject = f"{kind} {what}"
    now_value, base_value = _share(recent, metric), _share(base, metric)
    opened = open_alerts.get(subject)
    if opened is not None:  # judged against the baseline it fell from, not one the fall has dragged down
        base_value = opened.evidence.get("baseline")
    if now_value is None or not base_value:
        return {}
    if now_value >= float(t["recover_ratio"]) * base_value:
        return {subject: None}
    too_little = opened is None and base["pages"] < t["min_pages"]
    if too_little or now_value >= float(t["drop_ratio"]) * base_value:
        return {}  # no baseline yet, or between the two ratios: as it was
    shown = f"{now_value:.2f} items per page" if metric == "items" else f"in {now_value:.0%} of its items"
    was = f"{base_value:.2f}" if metric == "items" else f"{base_value:.0%}"
    return {
        subject: Finding(
            f"{project.name}: template changed? {_maker(kind)}: {what} {shown} over the last {recent['pages']} "
            f"pages, against {was} before",
            {
                "rule_set": name,
                "kind": kind,
                "metric": metric,
                "value": round(now_value, 4),
                "baseline": round(base_value, 4),
                "pages": recent["pages"],
                "baseline_pages": base["pages"],
                "sample_pages": _sample_pages(project, kind, metric),
            },
        )
    }


def _maker(kind: str) -> str:
    """What makes items of this kind, in the alert's words: "rule set products", "the spider"."""
    return f"rule set {kind.removeprefix('rule:')}" if kind.startswith("rule:") else f"the {kind}"


SAMPLES = 5  # pages of a template-change alert, to open in the debugger


def _sample_pages(project: Project, kind: str, metric: str) -> list[int]:
    """Ids of the newest pages whose items of `kind` lack the field (for "items": that have none)."""
    items = Item.objects.filter(project_id=project.id, kind=kind).order_by("-updated_at")
    if metric == "items":
        pages = Page.objects.filter(project=project, state="done").exclude(items__kind=kind).order_by("-fetched_at")
        return list(pages.values_list("id", flat=True)[:SAMPLES])
    name = metric.removeprefix("field:")
    found: list[int] = []
    for page_id, data in items.values_list("page_id", "data")[: SAMPLES * 20].iterator():
        if isinstance(data, dict) and data.get(name) in (None, "", [], {}) and page_id not in found:
            found.append(page_id)
        if len(found) == SAMPLES:
            break
    return found


def job_failed(project: Project, t: dict, now: datetime, open_alerts: dict) -> dict:
    """The project's last ended job failed; back when a later one succeeds."""
    last = Job.objects.filter(project=project, state__in=(Job.State.SUCCEEDED, Job.State.FAILED)).first()
    if last is None:
        return {}
    if last.state == Job.State.SUCCEEDED:
        return {"jobs": None}
    from console.runs.jobreads import job_failures

    failures = job_failures(last, limit=1)
    url = failures[0]["url"] if failures else ""
    return {
        "jobs": Finding(
            f"{project.name}: job {last.id} failed: {last.message}" + (f" (for example {url})" if url else ""),
            {"job": last.id, "message": last.message, "failing_url": url, "counts": last.stats},
        )
    }


def job_stalled(project: Project, t: dict, now: datetime, open_alerts: dict) -> dict:
    """A running job whose project owes work, and no fetch or extraction for `minutes`."""
    job = Job.objects.filter(id=project.job_id, state=Job.State.RUNNING).first() if project.job_id else None
    if job is None or project.status != Project.Status.ACTIVE:
        return {"job": None}
    since = _window(t, now)
    if (job.started_at or job.created_at) > since:
        return {}
    moved = sum(counters_since(project.id, since, scope="project").values())
    owed = sum(stage_backlog(project).values())
    if moved or not owed:
        return {"job": None}
    return {
        "job": Finding(
            f"{project.name}: job {job.id} stalled: {owed} rows owed and nothing fetched or extracted for "
            f"{minutes_text(t['minutes'])}",
            {"job": job.id, "owed": owed},
        )
    }


def no_worker(project: Project, t: dict, now: datetime, open_alerts: dict) -> dict:
    """A stage the project owes work to, and no live worker consumes its queue."""
    consumed, out = queues_consumed(), {}
    for stage, owed in stage_backlog(project).items():
        queue = STAGES[RENDER if stage == FETCH and project.render_js else stage].queue
        if owed and queue not in consumed and project.status == Project.Status.ACTIVE:
            out[f"stage {stage}"] = Finding(
                f"{project.name}: {owed} rows owe the {stage} stage and no worker consumes the '{queue}' queue",
                {"stage": stage, "queue": queue, "owed": owed},
            )
        else:
            out[f"stage {stage}"] = None
    return out


def host_backoff(project: Project, t: dict, now: datetime, open_alerts: dict) -> dict:
    """A host the project fetched from lately that is blocked, or held back for more than `minutes`."""
    hosts = {key for (_s, key, _m) in counters_since(project.id, now - timedelta(hours=1), scope="host")}
    hosts |= {a.removeprefix("host ") for a in open_alerts}
    out = {}
    for host in Host.objects.filter(host__in=hosts):
        held = host.backoff_until and host.backoff_until > now + timedelta(minutes=float(t["minutes"]))
        if host.blocked or held:
            reason = f" after {host.slow_reason}" if host.slow_reason else ""
            why = (
                f"blocked ({host.blocked_reason or 'by an operator'})"
                if host.blocked
                else f"backing off until {host.backoff_until:%H:%M} UTC{reason}"
            )
            out[f"host {host.host}"] = Finding(
                f"{project.name}: {host.host} is {why}",
                {
                    "host": host.host,
                    "blocked": host.blocked,
                    "backoff_until": str(host.backoff_until or ""),
                    "last_status": host.last_status,
                },
            )
        else:
            out[f"host {host.host}"] = None
    return out


def zero_throughput(project: Project, t: dict, now: datetime, open_alerts: dict) -> dict:
    """An active project with pages due for `minutes` and not one fetch in that time."""
    since = _window(t, now)
    if project.status != Project.Status.ACTIVE:
        return {"fetching": None}
    waiting = Page.objects.filter(project=project, state=Page.State.QUEUED, next_fetch_at__lte=since)
    fetched = sum(n for (_s, _k, m), n in counters_since(project.id, since, scope="project").items() if m in FETCHES)
    if fetched or not waiting.exists():
        return {"fetching": None}
    owed = Page.objects.filter(project=project, state__in=PAGE_PENDING_STATES).count()
    return {
        "fetching": Finding(
            f"{project.name}: nothing fetched for {minutes_text(t['minutes'])} while {owed} pages are owed",
            {"owed": owed, "since": since.isoformat()},
        )
    }


def sink_failing(project: Project, t: dict, now: datetime, open_alerts: dict) -> dict:
    """An active sink whose deliveries have failed for more than `minutes` (no delivery succeeded
    since); back when one succeeds. The message holds its last error, secrets masked."""
    out = {}
    sinks = Sink.objects.filter(project=project)
    named = {a.removeprefix("sink ") for a in open_alerts}
    for sink in sinks.filter(models.Q(active=True) | models.Q(name__in=named)):
        subject = f"sink {sink.name}"
        if not sink.active or sink.failing_since is None or sink.failing_since > _window(t, now):
            out[subject] = None
            continue
        error = sink_error_masked(sink, sink_last_error(sink))
        since = sink.failing_since.isoformat(timespec="seconds")
        out[subject] = Finding(
            f"sink {sink.name} ({sink.kind}) failing since {since}: {error[:300]}",
            {"sink": sink.id, "failing_since": since, "last_error": error[:1000]},
        )
    return out


CHECKS = {
    Monitor.Kind.SITE_DOWN: site_down,
    Monitor.Kind.TEMPLATE_CHANGED: template_changed,
    Monitor.Kind.JOB_FAILED: job_failed,
    Monitor.Kind.JOB_STALLED: job_stalled,
    Monitor.Kind.NO_WORKER: no_worker,
    Monitor.Kind.HOST_BACKOFF: host_backoff,
    Monitor.Kind.HOST_BLOCKED: host_blocked,
    Monitor.Kind.ZERO_THROUGHPUT: zero_throughput,
    Monitor.Kind.SINK_FAILING: sink_failing,
}
