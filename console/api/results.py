"""Read-only results: the frontier's pages, failed pages, extracted items and media assets."""

from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from console import control
from crawl.models import Page
from media.models import MediaAsset
from scrape.models import Item

from . import serializers as s
from .filters import AssetFilter, FailureFilter, ItemFilter, PageFilter


class PageViewSet(viewsets.ReadOnlyModelViewSet):
    """Every URL of every project and where it is in the pipeline (never the stored body)."""

    queryset = Page.objects.select_related("project")
    serializer_class = s.PageSerializer
    filterset_class = PageFilter
    lookup_value_regex = s.ID_PATTERN

    @extend_schema(
        request=s.PagesRetrySerializer, responses=s.RequeuedResultSerializer, summary="Retry selected failed pages"
    )
    @action(detail=False, methods=["post"], filter_backends=[], pagination_class=None)
    def retry(self, request: Request) -> Response:
        """Give the failed pages among `ids` fresh attempts and queue them now; others are left alone."""
        body = s.PagesRetrySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        requeued = control.pages_retry(pages=Page.objects.filter(id__in=body.validated_data["ids"]))
        return Response({"requeued": requeued})


class FailureViewSet(viewsets.ReadOnlyModelViewSet):
    """Failed pages with their error code and message."""

    queryset = Page.objects.filter(state=Page.State.FAILED).select_related("project")
    serializer_class = s.FailureSerializer
    filterset_class = FailureFilter
    lookup_value_regex = s.ID_PATTERN


class ItemViewSet(viewsets.ReadOnlyModelViewSet):
    """Structured data extracted from pages."""

    queryset = Item.objects.select_related("project", "page")
    serializer_class = s.ItemSerializer
    filterset_class = ItemFilter
    lookup_value_regex = s.ID_PATTERN


class AssetViewSet(viewsets.ReadOnlyModelViewSet):
    """Media assets, with a download URL once stored."""

    queryset = MediaAsset.objects.select_related("project")
    serializer_class = s.AssetSerializer
    filterset_class = AssetFilter
    lookup_value_regex = s.ID_PATTERN
