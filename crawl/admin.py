"""Admin for projects, seeds, the frontier and robots cache (issue 7 builds the full console on it)."""

from django.contrib import admin, messages

from crawl import pipeline
from crawl.models import Page, Project, RobotsTxt, Seed
from crawl.services.projects import project_counts


class SeedInline(admin.TabularInline):
    model = Seed
    extra = 1


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "status", "max_depth", "max_pages", "obey_robots", "created_at")
    list_filter = ("status",)
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [SeedInline]
    readonly_fields = ("frontier",)
    fieldsets = (
        (None, {"fields": ("name", "slug", "status", "frontier")}),
        ("Scope", {"fields": ("allowed_domains", "max_depth", "max_pages", "allow_patterns", "deny_patterns")}),
        ("Fetching", {"fields": ("obey_robots", "user_agent", "concurrency", "allow_private", "download_media")}),
    )

    @admin.display(description="Frontier by state")
    def frontier(self, obj):
        counts = project_counts(obj) if obj.pk else {}
        return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "empty"


@admin.register(Page)
class PageAdmin(admin.ModelAdmin):
    list_display = ("url", "project", "state", "status_code", "depth", "error_code", "fetched_at")
    list_filter = ("state", "status_code", "error_code", "project")
    search_fields = ("url", "title")
    list_select_related = ("project",)
    show_full_result_count = False
    raw_id_fields = ("discovered_from",)
    readonly_fields = [f.name for f in Page._meta.fields]
    actions = ("retry_pages",)

    @admin.action(description="Retry selected pages")
    def retry_pages(self, request, queryset):
        ids = list(queryset.filter(state=Page.State.FAILED).values_list("id", flat=True))
        Page.objects.filter(id__in=ids, state=Page.State.FAILED).update(
            state=Page.State.QUEUED, attempts=0, error_code="", error_message="", enqueued_at=None
        )
        pipeline.publish_fetch(ids)
        self.message_user(request, f"{len(ids)} failed pages queued again.", messages.SUCCESS)


@admin.register(RobotsTxt)
class RobotsTxtAdmin(admin.ModelAdmin):
    list_display = ("origin", "status_code", "error", "fetched_at")
    search_fields = ("origin",)
