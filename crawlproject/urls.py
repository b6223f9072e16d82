"""URL configuration: the admin (with its "Try a URL" debugger and the dashboard), the REST API
with its OpenAPI schema and docs, and the Prometheus metrics endpoint."""

from django.contrib import admin
from django.urls import include, path

from crawl.views import changes_since
from scrape.admin import try_url_view

urlpatterns = [
    path("admin/tryurl/", admin.site.admin_view(try_url_view), name="admin-tryurl"),
    path("admin/", admin.site.urls),
    path("api/changes/", changes_since, name="api-changes"),
    path("api/", include("crawl.api.urls")),
]
