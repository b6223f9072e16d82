"""Read-only JSON views (the full REST API comes with the operating issue)."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, JsonResponse
from django.utils.dateparse import parse_datetime

from console.access import may, scoped
from crawl.models import PageVersion

CHANGES_PAGE = 1000


@login_required
def changes_since(request: HttpRequest) -> JsonResponse:
    """Page versions (real content changes) after ?since=<ISO time>, oldest first, for ?project=<slug>:
    what a search indexer polls. `next_since` continues where this page stopped. Only the projects the
    user may see."""
    if not may(request.user, "view"):
        raise PermissionDenied
    since = parse_datetime(request.GET.get("since", "")) if request.GET.get("since") else None
    if request.GET.get("since") and since is None:
        return JsonResponse({"error": "since must be an ISO 8601 date-time"}, status=400)
    versions = scoped(PageVersion.objects.select_related("page"), request.user, "page__project")
    versions = versions.order_by("fetched_at", "id")
    if since is not None:
        versions = versions.filter(fetched_at__gt=since)
    if request.GET.get("project"):
        versions = versions.filter(page__project__slug=request.GET["project"])
    rows = list(versions[:CHANGES_PAGE])
    changes = [
        {
            "url": v.page.url,
            "page_id": v.page_id,
            "fetched_at": v.fetched_at.isoformat(),
            "title": v.title,
            "text_hash": v.text_hash,
            "content_sha256": v.content_sha256,
            "size": v.size,
        }
        for v in rows
    ]
    next_since = rows[-1].fetched_at.isoformat() if len(rows) == CHANGES_PAGE else None
    return JsonResponse({"changes": changes, "next_since": next_since})
