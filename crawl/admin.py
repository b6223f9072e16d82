"""Admin for projects, seeds, the frontier and robots cache (issue 7 builds the full console on it)."""

from django import forms
from django.contrib import admin, messages

from crawl import pipeline
from crawl.models import Host, Page, Project, RobotsTxt, Seed
from crawl.services.projects import project_counts, seed_problem
from scrape.models import RuleSet


class SeedForm(forms.ModelForm):
    """Seeds are checked like every URL the crawler would fetch; a refused one says why."""

    class Meta:
        model = Seed
        fields = ("url", "kind", "active", "method", "body", "headers")

    def clean_url(self):
        url = self.cleaned_data["url"]
        allow_private = bool(self.instance.project_id and self.instance.project.allow_private)
        problem = seed_problem(url, allow_private=allow_private)
        if problem:
            raise forms.ValidationError(problem)
        return url


class SeedInline(admin.TabularInline):
    model = Seed
    form = SeedForm
    extra = 1


class RuleSetInline(admin.StackedInline):
    model = RuleSet
    extra = 0
    readonly_fields = ("version",)


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "status", "max_depth", "max_pages", "obey_robots", "created_at")
    list_filter = ("status",)
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [SeedInline, RuleSetInline]
    readonly_fields = ("frontier",)
    fieldsets = (
        (None, {"fields": ("name", "slug", "status", "frontier")}),
        (
            "Scope",
            {
                "fields": (
                    "allowed_domains",
                    "max_depth",
                    "max_pages",
                    "max_pages_per_host",
                    "allow_patterns",
                    "deny_patterns",
                    "follow_sitemaps",
                )
            },
        ),
        (
            "Politeness",
            {"fields": ("obey_robots", "min_delay", "max_per_host", "concurrency", "rate_limit", "rate_burst")},
        ),
        ("Requests", {"fields": ("user_agent", "request_headers", "cookies", "proxy", "allow_private")}),
        (
            "Media",
            {
                "fields": (
                    "download_media",
                    "media_kinds",
                    "media_extensions",
                    "media_mime_types",
                    "media_max_bytes",
                    "media_any_host",
                    "media_page_patterns",
                    "gallery_page_patterns",
                )
            },
        ),
    )

    @admin.display(description="Frontier by state")
    def frontier(self, obj):
        counts = project_counts(obj) if obj.pk else {}
        return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "empty"


@admin.register(Page)
class PageAdmin(admin.ModelAdmin):
    list_display = ("url", "project", "state", "status_code", "depth", "error_code", "fetched_at", "text_hash")
    list_filter = ("state", "status_code", "error_code", "kind", "project")
    search_fields = ("url", "title", "=text_hash")
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


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = (
        "host",
        "blocked",
        "next_allowed_at",
        "backoff_until",
        "crawl_delay",
        "min_delay",
        "max_in_flight",
        "last_status",
        "updated_at",
    )
    list_filter = ("blocked",)
    search_fields = ("host",)
    readonly_fields = ("next_allowed_at", "backoff_until", "crawl_delay", "last_status", "updated_at")
    actions = ("block_hosts", "unblock_hosts")

    @admin.action(description="Block selected hosts")
    def block_hosts(self, request, queryset):
        n = queryset.update(blocked=True, blocked_reason=f"blocked by {request.user}")
        self.message_user(request, f"{n} hosts blocked.", messages.SUCCESS)

    @admin.action(description="Unblock selected hosts")
    def unblock_hosts(self, request, queryset):
        n = queryset.update(blocked=False, blocked_reason="")
        self.message_user(request, f"{n} hosts unblocked.", messages.SUCCESS)
