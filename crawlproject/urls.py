"""URL configuration: the admin (later: dashboard and REST API)."""

from django.contrib import admin
from django.urls import path

urlpatterns = [
    path("admin/", admin.site.urls),
]
