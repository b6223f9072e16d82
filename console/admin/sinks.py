"""Admin for result sinks: configured inline on their project, and listed with what each delivered,
what it owes and why it fails (with a retry of its failed records)."""

from django.contrib import admin, messages
from django.utils.html import format_html

from scrape.sinks.delivery import sink_counts, sink_last_error, sink_retry
from scrape.sinks.models import Sink


class SinkInline(admin.StackedInline):
    model = Sink
    extra = 0
    fields = ("name", "kind", "config", "items", "pages", "assets", "active")


@admin.register(Sink)
class SinkAdmin(admin.ModelAdmin):
    list_display = ("name", "project", "kind", "active", "delivered", "owed", "failed", "last_error")
    list_filter = ("kind", "active", "project")
    fields = ("project", "name", "kind", "config", "items", "pages", "assets", "active")
    actions = ("retry_failed",)

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("project")

    @admin.display(description="delivered")
    def delivered(self, obj):
        return _counts(obj)["done"]

    @admin.display(description="owed")
    def owed(self, obj):
        counts = _counts(obj)
        return counts["pending"] + counts["leased"]

    @admin.display(description="failed")
    def failed(self, obj):
        return _counts(obj)["failed"]

    @admin.display(description="last error")
    def last_error(self, obj):
        error = sink_last_error(obj)
        return format_html('<span title="{}">{}</span>', error, error[:160]) if error else "-"

    @admin.action(description="Retry the failed records of the selected sinks")
    def retry_failed(self, request, queryset):
        count = sum(sink_retry(sink) for sink in queryset)
        self.message_user(request, f"{count} failed records queued again.", messages.SUCCESS)


def _counts(sink: Sink) -> dict[str, int]:
    """The sink's records by state, counted once per row of the list (three columns show them)."""
    if not hasattr(sink, "_state_counts"):
        sink._state_counts = sink_counts(sink)
    return sink._state_counts
