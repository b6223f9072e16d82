"""Reads used by commands and (later) the dashboard and API."""

from django.db.models import Count

from crawl.models import Page, Project
from crawl.querysets import PENDING_STATES
from media.models import MediaAsset


def project_progress(project: Project) -> dict:
    """Counts by state of pages and assets, and whether any work is still owed."""
    pages = dict(Page.objects.filter(project=project).values_list("state").annotate(n=Count("id")))
    assets = dict(MediaAsset.objects.filter(project=project).values_list("state").annotate(n=Count("id")))
    pending = sum(pages.get(s, 0) for s in PENDING_STATES) + assets.get("queued", 0) + assets.get("leased", 0)
    return {"pages": pages, "assets": assets, "pending": pending}


def project_errors(project: Project) -> dict[str, int]:
    rows = Page.objects.filter(project=project, state=Page.State.FAILED).values_list("error_code")
    return dict(rows.annotate(n=Count("id")).order_by("-n"))
