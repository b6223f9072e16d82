"""Admin for projects, seeds, the frontier and robots cache (issue 7 builds the full console on it)."""

import difflib
import re

from django import forms
from django.contrib import admin, messages
from django.http import Http404
from django.shortcuts import get_object_or_404, render
from django.urls import path, reverse
from django.utils.html import format_html

from crawl import pipeline
from crawl.models import Host, Page, PageVersion, Project, RobotsTxt, Seed
from crawl.selectors import project_progress
from crawl.services.frontier import pages_recrawl
from crawl.services.projects import seed_problem
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
        ("Extraction", {"fields": ("spider", "api_config", "main_text", "render_js")}),
        (
            "Recrawl",
            {
                "fields": (
                    "recrawl_every_minutes",
                    "recrawl_crontab",
                    "revisit_min_seconds",
                    "revisit_max_seconds",
                    "hub_revisit_seconds",
                )
            },
        ),
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

    actions = ("recrawl_now",)

    @admin.action(description="Recrawl now (every finished page, with conditional GET)")
    def recrawl_now(self, request, queryset):
        count = sum(pages_recrawl(project=project) for project in queryset)
        self.message_user(request, f"{count} pages queued again.", messages.SUCCESS)

    @admin.display(description="Frontier by state")
    def frontier(self, obj):
        counts = project_progress(obj)["pages"] if obj.pk else {}
        return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "empty"


class PageVersionInline(admin.TabularInline):
    model = PageVersion
    fields = ("fetched_at", "title", "size", "text_hash", "diff_link")
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ("-fetched_at",)

    @admin.display(description="diff")
    def diff_link(self, obj):
        previous = PageVersion.objects.filter(page_id=obj.page_id, fetched_at__lt=obj.fetched_at).last()
        if previous is None:
            return "first version"
        url = reverse("admin:crawl_page_diff", args=[obj.page_id]) + f"?a={previous.id}&b={obj.id}"
        return format_html('<a href="{}">changes since the previous version</a>', url)


@admin.register(Page)
class PageAdmin(admin.ModelAdmin):
    inlines = [PageVersionInline]
    list_display = ("url", "project", "state", "status_code", "depth", "error_code", "fetched_at", "text_hash")
    list_filter = ("state", "status_code", "error_code", "kind", "project")
    search_fields = ("url", "title", "=text_hash")
    list_select_related = ("project",)
    show_full_result_count = False
    raw_id_fields = ("discovered_from",)
    readonly_fields = [f.name for f in Page._meta.fields]
    actions = ("retry_pages",)

    def get_urls(self):
        diff = path("<int:page_id>/diff/", self.admin_site.admin_view(self.diff_view), name="crawl_page_diff")
        return [diff, *super().get_urls()]

    def diff_view(self, request, page_id: int):
        """The lines that changed between two versions of a page (?a=<version id>&b=<version id>)."""
        page = get_object_or_404(Page, id=page_id)
        wanted = [request.GET.get("a", ""), request.GET.get("b", "")]
        if not all(v.isdigit() for v in wanted):
            raise Http404("choose two versions of this page")
        versions = {v.id: v for v in page.versions.filter(id__in=wanted)}
        a, b = versions.get(int(wanted[0])), versions.get(int(wanted[1]))
        if a is None or b is None:
            raise Http404("choose two versions of this page")
        lines = list(
            difflib.unified_diff(_lines(a.text), _lines(b.text), str(a.fetched_at), str(b.fetched_at), lineterm="")
        )
        context = {
            **self.admin_site.each_context(request),
            "title": f"Changes of {page.url}",
            "page": page,
            "a": a,
            "b": b,
            "lines": lines,
        }
        return render(request, "admin/crawl/page_diff.html", context)

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


def _lines(text: str) -> list[str]:
    """Visible text has no line breaks of its own: one sentence a line keeps diffs readable."""
    return [line for line in re.split(r"(?<=[.!?])\s+", text) if line]
