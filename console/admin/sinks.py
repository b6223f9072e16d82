"""Admin for result sinks: configured inline on their project, and listed with what each delivered,
what it owes and why it fails (with a retry of its failed records)."""

from django.contrib import admin, messages
from django.utils.html import format_html

from scrape.sinks.delivery import sink_counts, sink_retry
from scrape.sinks.models import Sink, SinkDelivery


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
        return sink_counts(obj)["done"]

    @admin.display(description="owed")
    def owed(self, obj):
        counts = sink_counts(obj)
        return counts["pending"] + counts["leased"]

    @admin.display(description="failed")
    def failed(self, obj):
        return sink_counts(obj)["failed"]

    @admin.display(description="last error")
    def last_error(self, obj):
        last = SinkDelivery.objects.filter(sink=obj).exclude(error="").order_by("-updated_at").first()
        if last is None:
            return "-"
        return format_html('<span class="errornote-inline" title="{}">{}</span>', last.error, last.error[:160])

    @admin.action(description="Retry the failed records of the selected sinks")
    def retry_failed(self, request, queryset):
        count = sum(sink_retry(sink) for sink in queryset)
        self.message_user(request, f"{count} failed records queued again.", messages.SUCCESS)
