"""Admin for the frontier: pages, failed pages, hosts and the robots.txt cache. The page tables
hold millions of rows, so lists never count or DISTINCT them whole (crawl/admin_lists.py)."""

import difflib
import re

from django.contrib import admin, messages
from django.http import Http404
from django.shortcuts import get_object_or_404, render
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from console import jobs
from console.admin.lists import CappedPaginator, recent_values_filter
from console.control import host_block, host_unblock, pages_requeue, pages_retry
from console.models import Job
from crawl.models import FailedPage, Host, Page, PageVersion, Project, RobotsTxt

FAILED = {"state": Page.State.FAILED}


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


class FrontierAdmin(admin.ModelAdmin):
    """What the page and failure lists share: read-only rows, bounded counts, retry actions."""

    search_fields = ("url", "title", "=text_hash")
    list_select_related = ("project",)
    show_full_result_count = False
    paginator = CappedPaginator
    raw_id_fields = ("project", "discovered_from")
    readonly_fields = [f.name for f in Page._meta.fields]
    actions = ("retry_pages",)

    def has_add_permission(self, request):
        return False  # pages come from seeds and links, never typed in

    @admin.action(description="Retry selected failed pages")
    def retry_pages(self, request, queryset):
        count = pages_retry(pages=queryset)
        self.message_user(request, f"{count} failed pages queued again.", messages.SUCCESS)

    @admin.display(description="error message")
    def message(self, obj):
        return Truncator(obj.error_message).chars(120)


@admin.register(Page)
class PageAdmin(FrontierAdmin):
    inlines = [PageVersionInline]
    list_display = (
        "url",
        "project",
        "state",
        "status_code",
        "host",
        "depth",
        "error_code",
        "content_type",
        "fetched_at",
    )
    list_filter = (
        "state",
        recent_values_filter("status_code", "status code"),
        recent_values_filter("host", "host"),
        recent_values_filter("depth", "depth"),
        recent_values_filter("error_code", "error code", **FAILED),
        recent_values_filter("content_type", "content type"),
        recent_values_filter("kind", "kind"),
        "project",
    )
    actions = ("retry_pages", "requeue_pages")

    @admin.action(description="Fetch selected finished or failed pages again now")
    def requeue_pages(self, request, queryset):
        count = pages_requeue(pages=queryset)
        self.message_user(request, f"{count} pages queued again.", messages.SUCCESS)

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


@admin.register(FailedPage)
class FailedPageAdmin(FrontierAdmin):
    list_display = ("url", "project", "error_code", "message", "status_code", "attempts", "host", "updated_at")
    list_filter = (
        recent_values_filter("error_code", "error code"),
        recent_values_filter("host", "host"),
        "project",
    )
    actions = ("retry_pages", "retry_projects")

    def get_queryset(self, request):
        return super().get_queryset(request).filter(**FAILED)

    @admin.action(description="Retry every failed page of the selected rows' projects")
    def retry_projects(self, request, queryset):
        projects = Project.objects.filter(id__in=queryset.values("project_id"))
        count = sum(
            jobs.crawl_retry_failed(project=p, trigger=Job.Trigger.ADMIN, user=request.user)[1] for p in projects
        )
        self.message_user(request, f"{count} failed pages queued again.", messages.SUCCESS)


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = (
        "host",
        "blocked",
        "blocked_reason",
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
    show_full_result_count = False
    paginator = CappedPaginator
    readonly_fields = ("next_allowed_at", "backoff_until", "crawl_delay", "last_status", "updated_at")
    actions = ("block_hosts", "unblock_hosts")

    @admin.action(description="Block selected hosts (their pages fail as host_blocked)")
    def block_hosts(self, request, queryset):
        hosts = list(queryset.values_list("host", flat=True))
        for host in hosts:
            host_block(host=host, reason=f"blocked by {request.user} in the admin")
        self.message_user(request, f"{len(hosts)} hosts blocked.", messages.SUCCESS)

    @admin.action(description="Unblock selected hosts (and retry their host_blocked pages)")
    def unblock_hosts(self, request, queryset):
        hosts = list(queryset.values_list("host", flat=True))
        published = sum(host_unblock(host=host) for host in hosts)
        self.message_user(request, f"{len(hosts)} hosts unblocked, {published} pages published.", messages.SUCCESS)


@admin.register(RobotsTxt)
class RobotsTxtAdmin(admin.ModelAdmin):
    list_display = ("origin", "status_code", "error", "fetched_at")
    search_fields = ("origin",)
    show_full_result_count = False


def _lines(text: str) -> list[str]:
    """Visible text has no line breaks of its own: one sentence a line keeps diffs readable."""
    return [line for line in re.split(r"(?<=[.!?])\s+", text) if line]
