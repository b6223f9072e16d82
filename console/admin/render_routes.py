"""Admin for the routes in auto render mode: how each is fetched now, and why."""

from django.contrib import admin

from console.admin.access import PROJECT_FILTER, ProjectScopedAdmin
from scrape.models import RenderRoute


@admin.register(RenderRoute)
class RenderRouteAdmin(ProjectScopedAdmin):
    list_display = ("route", "project", "decision", "reason", "samples_started", "samples_matched", "decided_at")
    list_filter = ("decision", PROJECT_FILTER)
    list_select_related = ("project",)
    search_fields = ("route",)
    fields = (
        "project",
        "route",
        "decision",
        "reason",
        "evidence_url",
        "samples_started",
        "samples_matched",
        "decided_at",
        "updated_at",
    )
    readonly_fields = fields

    def has_add_permission(self, request):
        return False  # the extract stage finds the routes; deleting one lets it look again

    def has_change_permission(self, request, obj=None):
        return False
