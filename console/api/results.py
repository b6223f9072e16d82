"""Read-only results: the frontier's pages, failed pages, extracted items and media assets."""

from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from console.access.policy import scoped
from console.runs import control
from crawl.models import MediaAsset, Page
from scrape.models import Item

from . import serializers as s
from .filters import AssetFilter, FailureFilter, ItemFilter, PageFilter
from .permissions import ProjectScopedMixin, read_only


class PageViewSet(ProjectScopedMixin, viewsets.ReadOnlyModelViewSet):
    """Every URL of the user's projects and where it is in the pipeline (never the stored body)."""

    queryset = Page.objects.select_related("project")
    action_permissions = read_only("page") | {"retry": "console.run_project", "requeue": "console.run_project"}
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
        pages = scoped(Page.objects.filter(id__in=body.validated_data["ids"]), request.user)
        requeued = control.pages_retry(pages=pages)
        return Response({"requeued": requeued})

    @extend_schema(
        request=s.PagesRetrySerializer, responses=s.PagesRequeuedSerializer, summary="Fetch selected pages again now"
    )
    @action(detail=False, methods=["post"], filter_backends=[], pagination_class=None)
    def requeue(self, request: Request) -> Response:
        """Fetch the finished or failed pages among `ids` again now (conditional GET where validators
        are stored); pages still owed are left alone."""
        body = s.PagesRetrySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        pages = scoped(Page.objects.filter(id__in=body.validated_data["ids"]), request.user)
        return Response({"requeued": control.pages_requeue(pages=pages)})


class FailureViewSet(ProjectScopedMixin, viewsets.ReadOnlyModelViewSet):
    """Failed pages with their error code and message."""

    action_permissions = read_only("page")
    queryset = Page.objects.filter(state=Page.State.FAILED).select_related("project")
    serializer_class = s.FailureSerializer
    filterset_class = FailureFilter
    lookup_value_regex = s.ID_PATTERN


class ItemViewSet(ProjectScopedMixin, viewsets.ReadOnlyModelViewSet):
    """Structured data extracted from pages."""

    action_permissions = read_only("item", app="scrape")
    queryset = Item.objects.select_related("project", "page")
    serializer_class = s.ItemSerializer
    filterset_class = ItemFilter
    lookup_value_regex = s.ID_PATTERN


class AssetViewSet(ProjectScopedMixin, viewsets.ReadOnlyModelViewSet):
    """Media assets, with a download URL once stored."""

    action_permissions = read_only("mediaasset", app="media") | {"retry": "console.run_project"}
    queryset = MediaAsset.objects.select_related("project")
    serializer_class = s.AssetSerializer
    filterset_class = AssetFilter
    lookup_value_regex = s.ID_PATTERN

    @extend_schema(
        request=s.AssetsRetrySerializer, responses=s.AssetsRequeuedSerializer, summary="Retry selected failed downloads"
    )
    @action(detail=False, methods=["post"], filter_backends=[], pagination_class=None)
    def retry(self, request: Request) -> Response:
        """Queue the failed assets among `ids` again with fresh attempts; others are left alone."""
        body = s.AssetsRetrySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        assets = scoped(MediaAsset.objects.filter(id__in=body.validated_data["ids"]), request.user)
        return Response({"requeued": control.assets_retry(assets=assets)})
