"""REST API routes (mounted at /api/): resources, the change feed, the OpenAPI schema and its Swagger UI."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from .changes import ChangesView
from .controls import HostViewSet, RuleSetViewSet, TryURLView
from .health import AlertViewSet, MonitorViewSet
from .jobs import JobViewSet
from .projects import ProjectViewSet, SeedViewSet
from .results import AssetViewSet, FailureViewSet, ItemViewSet, PageViewSet
from .sinks import SinkViewSet
from .spider_versions import SpiderVersionActivateView, SpiderVersionDetailView, SpiderVersionListView
from .targets import NotificationTargetViewSet

router = DefaultRouter()
router.register("projects", ProjectViewSet, basename="project")
router.register("seeds", SeedViewSet, basename="seed")
router.register("jobs", JobViewSet, basename="job")
router.register("sinks", SinkViewSet, basename="sink")
router.register("monitors", MonitorViewSet, basename="monitor")
router.register("alerts", AlertViewSet, basename="alert")
router.register("notification-targets", NotificationTargetViewSet, basename="notification-target")
router.register("pages", PageViewSet, basename="page")
router.register("failures", FailureViewSet, basename="failure")
router.register("items", ItemViewSet, basename="item")
router.register("assets", AssetViewSet, basename="asset")
router.register("rulesets", RuleSetViewSet, basename="ruleset")
router.register("hosts", HostViewSet, basename="host")

urlpatterns = [
    path("changes/", ChangesView.as_view(), name="api-changes"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its script from a URL of its own: the console's CSP runs no inline script.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("try/", TryURLView.as_view(), name="api-try"),
    path("projects/<slug:slug>/spider-versions/", SpiderVersionListView.as_view(), name="api-spider-versions"),
    path(
        "projects/<slug:slug>/spider-versions/<int:number>/",
        SpiderVersionDetailView.as_view(),
        name="api-spider-version",
    ),
    path(
        "projects/<slug:slug>/spider-versions/<int:number>/activate/",
        SpiderVersionActivateView.as_view(),
        name="api-spider-version-activate",
    ),
    path("", include(router.urls)),
]
