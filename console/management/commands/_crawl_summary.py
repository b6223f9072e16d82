"""What the crawl command prints: its progress table, its summary (the job's own counts and
times), and what became of a job it stopped waiting for."""

from django.db.models import Count
from rich.table import Table

from console.models import Job
from console.runs.jobs import job_counts, job_span
from console.selectors import project_progress, retrying_text
from crawl.models import Page, Project
from sinks.delivery import project_sink_counts

WORK_DONE = ("pages_done", "pages_failed", "assets_done", "assets_failed")


def crawl_summary(project: Project, job: Job, completed: bool) -> dict:
    """The summary the command prints (and --json gives): the job's own counts and times."""
    counts = job_counts(job)
    return {
        "project": project.slug,  # what the other commands take
        "name": project.name,  # what the console shows, and the lines below
        "allow_private": project.allow_private,
        "job": job.id,
        "state": job.state,
        "completed": completed,
        "pages_total": sum(counts["pages"].values()),
        "pages_fetched": counts["pages_done"],
        "pages_failed": counts["pages_failed"],
        "pages_not_parsed": counts.get("pages_not_parsed", 0),  # 0 in the stats of jobs ended before it
        "pages_pending": project_progress(project)["pending"],
        "errors": counts["errors"],  # the pages'; the media's are asset_errors
        "asset_errors": counts.get("asset_errors", {}),  # none in the stats of jobs ended before it
        "items": counts["items"],
        "assets": counts["assets_done"],
        "assets_failed": counts["assets_failed"],
        "bytes": counts["bytes"],
        "sinks": project_sink_counts(project.id),
        "seconds": counts["seconds"],  # the job's: from its start (the worker's too) to its end, pauses left out
        "work_seconds": _work_seconds(job),  # from its first fetch to its last finish (the bench's rate)
        # Seeds refused before any fetch have no rate worth giving.
        "pages_per_second": counts["pages_per_second"] if counts["pages_done"] else 0.0,
        "nothing_to_do": completed and not any(counts[k] for k in WORK_DONE),
        "earlier": _earlier_pages(project, job),
    }


def finished_summary(project: Project, *, done: int, failed: int) -> dict:
    """The summary of a run that found the project finished and made no job (as Start refuses)."""
    zero = dict.fromkeys(("pages_total", "pages_fetched", "pages_failed", "pages_not_parsed", "pages_pending"), 0)
    zero |= dict.fromkeys(("items", "assets", "assets_failed", "bytes"), 0)
    return {"project": project.slug, "name": project.name, "allow_private": project.allow_private, "job": None,
            "state": None, "completed": True, **zero, "errors": {}, "asset_errors": {},
            "sinks": project_sink_counts(project.id), "seconds": 0.0, "work_seconds": 0.0, "pages_per_second": 0.0,
            "nothing_to_do": True, "earlier": {"done": done, "failed": failed}}  # fmt: skip


def report_lines(s: dict) -> list[str]:
    """The summary for people: the job's line (or why there was nothing to do), its errors, its sinks."""
    if s["nothing_to_do"]:
        lines = [_nothing_line(s)]
    else:
        not_parsed = f" ({s['pages_not_parsed']} not parsed: not HTML)" if s["pages_not_parsed"] else ""
        # Seeds refused before any fetch have no rate worth printing.
        rate = f" in {s['seconds']} s ({s['pages_per_second']:.1f} pages/s)" if s["pages_fetched"] else ""
        lines = [
            f"{s.get('name', s['project'])} job {s['job']} {s['state']}: {s['pages_fetched']} pages done{not_parsed}, "
            f"{s['pages_failed']} failed, {s['assets']} assets stored ({s['assets_failed']} failed){rate}"
        ]
    lines += [f"  {n:6d} {code}" for code, n in s["errors"].items()]
    lines += [f"  {n:6d} {code} (media)" for code, n in s["asset_errors"].items()]
    for name, c in s["sinks"].items():
        failing = f", failing: {c['last_error'][:200]}" if c["last_error"] else ""
        lines.append(f"  sink {name}: {c['done']} delivered, {c['pending']} pending, {c['failed']} failed{failing}")
    return lines


def unfinished_text(job: Job, project: Project, why: str, worker) -> str:
    """What happens to a job the command stopped waiting for: an embedded one is paused (its
    workers stopped with the command), a distributed one goes on in the workers."""
    if worker:
        return f"{why}: job {job.id} of {project.name} is paused; run the same command again to resume it"
    return (
        f"{why}: stopped waiting, but job {job.id} of {project.name} goes on in the workers "
        f"(`manage.py jobs {project.slug}` shows it, `manage.py pause {project.slug}` pauses it)"
    )


def _work_seconds(job: Job) -> float:
    began, last = job_span(job)
    return round((last - began).total_seconds(), 2) if began and last else 0.0


def _earlier_pages(project: Project, job: Job | None) -> dict[str, int]:
    """The project's done and failed pages that earlier runs finished (not this job's)."""
    rows = Page.objects.filter(project=project, state__in=(Page.State.DONE, Page.State.FAILED))
    if job is not None:
        rows = rows.exclude(job_id=job.id)
    return dict(rows.values_list("state").annotate(n=Count("id")).order_by())


def _nothing_line(s: dict) -> str:
    """A run that fetched nothing says so, what earlier runs left, and the way to fetch them again."""
    done, failed = s["earlier"].get("done", 0), s["earlier"].get("failed", 0)
    retry = f", `manage.py requeue {s['project']}` retries the {failed} failed" if failed else ""
    job = f" job {s['job']}" if s["job"] else ""  # a job of an earlier version, or a race with another start
    return (
        f"{s.get('name', s['project'])}{job}: nothing to crawl, every page is finished ({done} done, {failed} failed "
        f"by earlier runs); --recrawl fetches the done pages again{retry}"
    )


def progress_table(progress: dict, elapsed: float) -> Table:
    waiting = "\n".join(retrying_text(row) for row in progress["retrying"]) or None
    table = Table(title=f"crawling for {elapsed:.0f} s", caption=waiting, show_edge=False)
    for state in ("queued", "leased", "fetched", "extracted", "done", "failed"):
        table.add_column(state, justify="right")
    table.add_column("assets done/pending", justify="right")
    pages, assets = progress["pages"], progress["assets"]
    pending_assets = assets.get("queued", 0) + assets.get("leased", 0)
    table.add_row(
        *(str(pages.get(s, 0)) for s in ("queued", "leased", "fetched", "extracted", "done", "failed")),
        f"{assets.get('done', 0)}/{pending_assets}",
    )
    return table
