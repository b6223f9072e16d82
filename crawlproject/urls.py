"""URL configuration: the admin (with its "Try a URL" debugger and the dashboard), the REST API
with its OpenAPI schema and docs, and the Prometheus metrics endpoint."""

from django.contrib import admin
from django.urls import include, path

from crawl.dashboard import dashboard_data, dashboard_view
from crawl.views import changes_since
from scrape.admin import try_url_view

urlpatterns = [
    path("admin/tryurl/", admin.site.admin_view(try_url_view), name="admin-tryurl"),
    path("admin/dashboard/", admin.site.admin_view(dashboard_view), name="admin-dashboard"),
    path("admin/dashboard/data/", admin.site.admin_view(dashboard_data), name="admin-dashboard-data"),
    path("admin/", admin.site.urls),
    path("api/changes/", changes_since, name="api-changes"),
    path("api/", include("crawl.api.urls")),
    path("metrics", include("crawl.metrics")),
]
