"""The console's routes: the crawl overview and dashboard and the "Try a URL" page inside the
admin, the REST API (console/api/urls.py) and the Prometheus metrics. crawlproject/urls.py mounts
them before the admin's own URLs, whose catch-all would otherwise answer admin/dashboard/."""

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from console.admin.debugger import debugger_view, rendered_view
from console.admin.scrape import try_url_view
from console.dashboard import dashboard_data, dashboard_view, overview_control, overview_data

admin.site.site_url = "/admin/dashboard/"  # the admin's "View site": the crawl overview
admin.site.site_header = "crawlhub"
admin.site.site_title = "crawlhub"

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/dashboard/", permanent=False)),
    path("favicon.ico", RedirectView.as_view(url=static("console/favicon.svg"), permanent=True)),  # browsers ask
    path("admin/tryurl/", admin.site.admin_view(try_url_view), name="admin-tryurl"),
    path("admin/debugger/", admin.site.admin_view(debugger_view), name="admin-debugger"),
    path("admin/debugger/<int:run_id>/rendered/", admin.site.admin_view(rendered_view), name="admin-debugger-rendered"),
    path("admin/dashboard/", admin.site.admin_view(dashboard_view), name="admin-dashboard"),
    path("admin/dashboard/data/", admin.site.admin_view(dashboard_data), name="admin-dashboard-data"),
    path("admin/dashboard/overview/", admin.site.admin_view(overview_data), name="admin-overview-data"),
    path("admin/dashboard/control/", admin.site.admin_view(overview_control), name="admin-overview-control"),
    path("api/", include("console.api.urls")),
    path("metrics", include("console.metrics")),
]
