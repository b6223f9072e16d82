"""The change feed: page versions (real content changes, of HTML pages and JSON API pages alike),
oldest first, continued by an opaque cursor, for a search indexer or another program to poll.

The cursor holds the last version id read. Version ids become visible in id order (the insert takes
a lock held to its commit: crawl/services/freshness.py), so a version written later, even one
fetched earlier or at the same instant as others, always comes after the cursor: nothing is
skipped, nothing is read twice."""

import base64
import binascii
import re

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.access.policy import may, scoped
from crawl.models import PageVersion

from .serializers import MAX_ID, SLUG_PATTERN

PAGE_SIZE, MAX_PAGE_SIZE = 500, 1000
_CURSOR = re.compile(r"v1:([0-9]{1,19})")
_PAGE_SIZE = re.compile(r"[0-9]{1,4}")  # ASCII digits only: str.isdigit() takes "²", which int() refuses


def cursor_encode(version_id: int) -> str:
    return base64.urlsafe_b64encode(f"v1:{version_id}".encode()).decode().rstrip("=")


def cursor_decode(cursor: str) -> int:
    """The version id a cursor holds (ValidationError for anything this feed did not hand out)."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        text = ""
    match = _CURSOR.fullmatch(text)
    if match is None or int(match.group(1)) > MAX_ID:
        raise ValidationError({"cursor": "not a cursor of this feed: pass next_cursor as it was answered"})
    return int(match.group(1))


class ChangeSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The version's id.")
    project = serializers.CharField(help_text="The project's slug.")
    page_id = serializers.IntegerField()
    url = serializers.CharField()
    kind = serializers.CharField(help_text="The page's kind (page, sitemap, feed, ...).")
    content_type = serializers.CharField()
    fetched_at = serializers.DateTimeField()
    title = serializers.CharField()
    text_hash = serializers.CharField(help_text="Hash of the normalised text (of the records, for a JSON API page).")
    content_sha256 = serializers.CharField()
    size = serializers.IntegerField(allow_null=True)


class ChangesSerializer(serializers.Serializer):
    changes = ChangeSerializer(many=True)
    next_cursor = serializers.CharField(help_text="Pass it as ?cursor= to read on from here (now or later).")
    more = serializers.BooleanField(help_text="Whether more versions were waiting when this page was read.")


class ChangesView(APIView):
    """Page versions after ?cursor= (all of them without one), oldest first; ?project=<slug>,
    ?since=<ISO time> (without a cursor: start at the versions fetched after it), ?page_size=."""

    @extend_schema(
        summary="Page versions, oldest first, continued by a cursor",
        parameters=[
            OpenApiParameter("cursor", str, description="The next_cursor of the previous answer."),
            OpenApiParameter("project", str, description="Only this project's versions (its slug)."),
            OpenApiParameter("since", str, description="Without a cursor: start after this ISO 8601 date-time."),
            OpenApiParameter("page_size", int, description=f"Versions per answer, 1 to {MAX_PAGE_SIZE}."),
        ],
        responses=ChangesSerializer,
    )
    def get(self, request: Request) -> Response:
        if not may(request.user, "view"):
            raise PermissionDenied
        versions = scoped(PageVersion.objects.select_related("page__project"), request.user, "page__project")
        project = request.query_params.get("project")
        if project is not None:
            if not re.fullmatch(SLUG_PATTERN, project):
                raise ValidationError({"project": "a project's slug"})
            versions = versions.filter(page__project__slug=project)
        after = self._position(request, versions)
        size = self._page_size(request)
        rows = list(versions.filter(id__gt=after).order_by("id")[: size + 1])
        more, rows = len(rows) > size, rows[:size]
        last = rows[-1].id if rows else after
        return Response({"changes": [_change(v) for v in rows], "next_cursor": cursor_encode(last), "more": more})

    @staticmethod
    def _position(request: Request, versions) -> int:
        """The id to read after: the cursor's, or (with ?since=) the last one fetched at or before it."""
        if request.query_params.get("cursor"):
            return cursor_decode(request.query_params["cursor"])
        if not request.query_params.get("since"):
            return 0
        since = _since(request.query_params["since"])
        first = versions.filter(fetched_at__gt=since).order_by("id").values_list("id", flat=True).first()
        return first - 1 if first is not None else versions.order_by("-id").values_list("id", flat=True).first() or 0

    @staticmethod
    def _page_size(request: Request) -> int:
        raw = request.query_params.get("page_size", str(PAGE_SIZE))
        if not _PAGE_SIZE.fullmatch(raw) or not 1 <= int(raw) <= MAX_PAGE_SIZE:
            raise ValidationError({"page_size": f"a number from 1 to {MAX_PAGE_SIZE}"})
        return int(raw)


def _since(text: str):
    """The aware time ?since= names; a 400 for one that is not a date-time or that no time zone can
    hold (0001-01-01T00:00:00+14:00 is before the first UTC instant)."""
    try:
        return serializers.DateTimeField().run_validation(text)
    except ValidationError as refused:
        raise ValidationError({"since": [f"an ISO 8601 date-time: {refused.detail[0]}"]}) from None


def _change(version: PageVersion) -> dict:
    page = version.page
    return {
        "id": version.id,
        "project": page.project.slug,
        "page_id": page.id,
        "url": page.url,
        "kind": page.kind,
        "content_type": page.content_type,
        "fetched_at": version.fetched_at.isoformat(),
        "title": version.title,
        "text_hash": version.text_hash,
        "content_sha256": version.content_sha256,
        "size": version.size,
    }
