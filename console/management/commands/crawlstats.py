"""python manage.py crawlstats [PROJECT] [--json]: where a project's work stands, from the rows."""

import io
import json
import shutil
import sys
from datetime import datetime, timedelta

from django.core.management.base import BaseCommand
from django.db.models import Count, Max, Q
from django.utils import timezone
from rich.console import Console
from rich.table import Table

from console.management.commands._project import project_arg
from console.selectors import project_errors, project_progress, stage_backlog
from crawl.models import MediaAsset, Page, Project

PAGE_STATES = Page.State.values
ASSET_STATES = MediaAsset.State.values
TOP_ERRORS = 10
WIDE = 200


class Command(BaseCommand):
    help = (
        "Show crawl statistics from the database: for one project, pages and assets by state, the top "
        f"{TOP_ERRORS} error codes, work owed per stage (fetch, extract, download), fetches in the last "
        "5 minutes and hour and the last fetch time; without PROJECT, one row per project."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", nargs="?", help="project slug, name or id (default: every project)")
        parser.add_argument("--json", action="store_true", help="print JSON (a list without PROJECT)")

    def handle(self, *args, **opts):
        now = timezone.now()
        if opts["project"]:
            stats = project_stats(project_arg(opts["project"]), now)
            self._show(stats, project_table(stats), opts["json"], _summary([stats], stats["project"]))
        else:
            rows = [project_stats(p, now) for p in Project.objects.order_by("slug")]
            self._show(rows, projects_table(rows), opts["json"], _summary(rows, f"{len(rows)} projects"))

    def _show(self, data, table: Table, as_json: bool, summary: str) -> None:
        if as_json:
            self.stdout.write(json.dumps(data))
            return
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else WIDE  # pipes and logs: no truncation
        console = Console(file=io.StringIO(), width=width)
        console.print(table)
        self.stdout.write(console.file.getvalue().rstrip("\n"))
        self.stdout.write(summary)


def project_stats(project: Project, now: datetime) -> dict:
    """Counts for one project; every state is present (0 when none)."""
    progress = project_progress(project)
    errors = sorted(project_errors(project).items(), key=lambda item: (-item[1], item[0]))
    fetches = Page.objects.filter(project=project, fetched_at__isnull=False).aggregate(
        last=Max("fetched_at"),
        last_5m=Count("id", filter=Q(fetched_at__gte=now - timedelta(minutes=5))),
        last_1h=Count("id", filter=Q(fetched_at__gte=now - timedelta(hours=1))),
    )
    return {
        "project": project.slug,
        "status": project.status,
        "pages": {s: progress["pages"].get(s, 0) for s in PAGE_STATES},
        "assets": {s: progress["assets"].get(s, 0) for s in ASSET_STATES},
        "errors": dict(errors[:TOP_ERRORS]),
        "owed": stage_backlog(project),
        "fetched_last_5m": fetches["last_5m"],
        "fetched_last_1h": fetches["last_1h"],
        "last_fetch_at": fetches["last"].isoformat() if fetches["last"] else None,
    }


def project_table(stats: dict) -> Table:
    table = Table(title=f"{stats['project']} ({stats['status']})", show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    for group in ("pages", "assets", "owed"):
        for name, n in stats[group].items():
            table.add_row(f"{group} {name}", str(n))
        table.add_section()
    for code, n in stats["errors"].items() or [("none", 0)]:
        table.add_row(f"errors {code}", str(n))
    table.add_section()
    table.add_row("fetched last 5 min", str(stats["fetched_last_5m"]))
    table.add_row("fetched last hour", str(stats["fetched_last_1h"]))
    table.add_row("last fetch", _short_time(stats["last_fetch_at"]))
    return table


def projects_table(rows: list[dict]) -> Table:
    table = Table(title="projects")
    table.add_column("project")
    table.add_column("status")
    for name in (*PAGE_STATES, "assets done/all", "owed fetch/extract/download", "fetched 5 min", "fetched 1 h"):
        table.add_column(name, justify="right")
    table.add_column("last fetch")
    for s in rows:
        owed = s["owed"]
        table.add_row(
            s["project"],
            s["status"],
            *(str(s["pages"][state]) for state in PAGE_STATES),
            f"{s['assets']['done']}/{sum(s['assets'].values())}",
            f"{owed['fetch']}/{owed['extract']}/{owed['download']}",
            str(s["fetched_last_5m"]),
            str(s["fetched_last_1h"]),
            _short_time(s["last_fetch_at"]),
        )
    return table


def _short_time(iso: str | None) -> str:
    return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M:%S %Z") if iso else "never"


def _summary(rows: list[dict], label: str) -> str:
    pages = sum(sum(s["pages"].values()) for s in rows)
    failed = sum(s["pages"]["failed"] for s in rows)
    owed = sum(sum(s["owed"].values()) for s in rows)
    return f"{label}: {pages} pages, {failed} failed, {owed} work items owed"
