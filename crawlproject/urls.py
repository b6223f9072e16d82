"""URL configuration, one include per app: the console (its overview, dashboard and "Try a URL"
pages in the admin, the REST API, the metrics endpoint; console/urls.py) and the Django admin."""

from django.contrib import admin
from django.urls import include, path

admin.autodiscover()  # the apps' admin modules (console.admin_app leaves them to the URLs)

urlpatterns = [
    # First: the console's admin/dashboard/ and admin/tryurl/ come before the admin's catch-all.
    path("", include("console.urls")),
    path("admin/", admin.site.urls),
]
