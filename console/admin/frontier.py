"""Admin for the frontier: pages, failed pages, hosts and the robots.txt cache. The page tables
hold millions of rows, so lists never count or DISTINCT them whole (console/admin/lists.py)."""

import difflib
import json
import re
import zlib

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import parse_header_parameters
from django.utils.text import Truncator

from console.admin.access import PROJECT_FILTER, AllProjectsAdmin, ProjectScopedAdmin
from console.admin.lists import CappedPaginator, recent_values_filter
from console.admin.scrape import item_table
from console.masking import masked_request
from console.models import Job
from console.runs import jobs
from console.runs.control import host_block, host_unblock, pages_requeue, pages_retry
from crawl.models import FailedPage, Host, Page, PageContent, PageVersion, Project, RobotsTxt
from scrape.models import HandlerLog

FAILED = {"state": Page.State.FAILED}
SHOWN = 50  # rows of each related list on a page's detail (links out, items, assets)


class PageVersionInline(admin.TabularInline):
    model = PageVersion
    fields = ("fetched_at", "title", "size", "text_hash", "diff_link")
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ("-fetched_at",)

    def has_add_permission(self, request, obj=None):
        return False  # versions are what refetches found

    @admin.display(description="diff")
    def diff_link(self, obj):
        previous = PageVersion.objects.filter(page_id=obj.page_id, fetched_at__lt=obj.fetched_at).last()
        if previous is None:
            return "first version"
        url = reverse("admin:crawl_page_diff", args=[obj.page_id]) + f"?a={previous.id}&b={obj.id}"
        return format_html('<a href="{}">changes since the previous version</a>', url)


class FrontierAdmin(ProjectScopedAdmin):
    """What the page and failure lists share: read-only rows of the user's projects, bounded counts,
    retry actions."""

    search_fields = ("url", "title", "=text_hash")
    list_select_related = ("project",)
    show_full_result_count = False
    paginator = CappedPaginator
    raw_id_fields = ("project", "discovered_from")
    # A row's own request is shown masked, never as stored.
    readonly_fields = ["masked_request" if f.name == "request" else f.name for f in Page._meta.fields]
    exclude = ("request",)
    actions = ("retry_pages",)

    def has_add_permission(self, request):
        return False  # pages come from seeds and links, never typed in

    def has_change_permission(self, request, obj=None):
        return False  # a record of the crawl: "View page", without Save; the actions steer it

    def has_delete_permission(self, request, obj=None):
        return False  # the frontier's rows are the crawl's truth: retry or requeue, never delete

    @admin.action(description="Retry selected failed pages", permissions=["run"])
    def retry_pages(self, request, queryset):
        count = pages_retry(pages=queryset)
        self.message_user(request, f"{count} failed pages queued again.", messages.SUCCESS)

    @admin.display(description="request")
    def masked_request(self, obj):
        """Its header and cookie values and its body may be secrets (an API key, a login form)."""
        return json.dumps(masked_request(obj.request), ensure_ascii=False) if obj.request else "-"

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
        PROJECT_FILTER,
    )
    actions = ("retry_pages", "requeue_pages")
    readonly_fields = [
        *FrontierAdmin.readonly_fields,
        "stored_body",
        "debugger_link",
        "links_out",
        "page_items",
        "page_assets",
        "handler_log",
    ]
    fieldsets = (
        ("Fetch", {"fields": (
            "url", "final_url", ("status_code", "content_type", "redirect_hops"), ("fetched_at", "fetch_ms"),
            ("fetched_by", "attempts", "proxy"), ("error_code", "error_message"), "masked_request", "stored_body",
            "debugger_link",
        )}),
        ("Content", {"fields": (
            "title", "content_sha256", ("content_length", "simhash"), "text_hash", ("itag", "extracted_by"),
        )}),
        ("Freshness", {"fields": (
            ("revisit_seconds", "changed_at", "next_fetch_at"), ("etag", "last_modified", "not_modified_at"),
            ("fetch_count", "change_count"),
        )}),
        ("Frontier", {"fields": (
            ("project", "host", "kind", "is_seed"), ("state", "priority", "depth"), "discovered_from",
            ("lease_token", "lease_expires_at", "enqueued_at"), "job_id", ("url_key", "created_at", "updated_at"),
        )}),
        ("Links out", {"fields": ("links_out",), "description": "Pages first discovered on this one."}),
        ("Items", {"fields": ("page_items", "handler_log")}),
        ("Assets", {"fields": ("page_assets",), "description": "Media this page references."}),
    )  # fmt: skip

    class Media:
        css = {"all": ("console/dashboard.css",)}

    @admin.action(description="Fetch selected finished or failed pages again now", permissions=["run"])
    def requeue_pages(self, request, queryset):
        count = pages_requeue(pages=queryset)
        self.message_user(request, f"{count} pages queued again.", messages.SUCCESS)

    @admin.display(description="stored body")
    def stored_body(self, obj):
        if not PageContent.objects.filter(page_id=obj.id).exists():
            return "none stored"
        url = reverse("admin:crawl_page_body", args=[obj.id])
        return format_html('<a href="{}">the stored response body, as plain text</a>', url)

    @admin.display(description="debugger")
    def debugger_link(self, obj):
        """Replay: the page's stored request (method, headers, body, route, meta) in the spider debugger."""
        url = f"{reverse('admin-debugger')}?page={obj.id}"
        return format_html('<a href="{}">Open this request in the spider debugger</a>', url)

    @admin.display(description="pages")
    def links_out(self, obj):
        pages = Page.objects.filter(discovered_from_id=obj.id).order_by("id").only("url", "state", "status_code")
        rows, more = _first_rows(pages)
        rows = [(reverse("admin:crawl_page_change", args=[p.id]), p.url, p.status_code or p.state) for p in rows]
        return render_to_string("admin/crawl/page_rows.html", {"rows": rows, "more": more, "shown": SHOWN})

    @admin.display(description="items")
    def page_items(self, obj):
        rows, more = _first_rows(obj.items.order_by("kind", "position"))
        items = [_item_table(item) for item in rows]
        return render_to_string("admin/crawl/page_items.html", {"items": items, "more": more, "shown": SHOWN})

    @admin.display(description="handler log")
    def handler_log(self, obj):
        """What the spider's handler logged on this page's last extraction, and its traceback."""
        lines = HandlerLog.objects.filter(page_id=obj.id).order_by("id").values_list("at", "level", "message")
        if not lines:
            return "nothing logged"
        rows = format_html_join("", "<tr><td>{}</td><td>{}</td><td><pre>{}</pre></td></tr>", lines)
        return format_html("<table><tr><th>at</th><th>level</th><th>message</th></tr>{}</table>", rows)

    @admin.display(description="assets")
    def page_assets(self, obj):
        rows, more = _first_rows(obj.asset_links.select_related("asset").order_by("asset_id"))
        rows = [_asset_row(link.asset) for link in rows]
        return render_to_string("admin/crawl/page_rows.html", {"rows": rows, "more": more, "shown": SHOWN})

    def get_urls(self):
        diff = path("<int:page_id>/diff/", self.admin_site.admin_view(self.diff_view), name="crawl_page_diff")
        body = path("<int:page_id>/body/", self.admin_site.admin_view(self.body_view), name="crawl_page_body")
        return [diff, body, *super().get_urls()]

    def body_view(self, request, page_id: int):
        """The stored response body, decompressed. It is the site's untrusted content, so it is only ever
        served as plain text, with sniffing and scripts off."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        if not self.get_queryset(request).filter(id=page_id).exists():
            raise Http404("no such page")
        content = PageContent.objects.filter(page_id=page_id).first()
        if content is None:
            return _plain_text(f"Page {page_id} has no stored body: it was not fetched, or its fetch failed.", 404)
        return _plain_text(_decoded(zlib.decompress(content.body), content.headers))

    def diff_view(self, request, page_id: int):
        """The lines that changed between two versions of a page (?a=<version id>&b=<version id>)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        page = get_object_or_404(self.get_queryset(request), id=page_id)
        wanted = [request.GET.get("a", ""), request.GET.get("b", "")]
        if not all(v.isascii() and v.isdigit() for v in wanted):
            raise Http404("choose two versions of this page")
        versions = {v.id: v for v in page.versions.filter(id__in=wanted)}
        a, b = versions.get(int(wanted[0])), versions.get(int(wanted[1]))
        if a is None or b is None:
            raise Http404("choose two versions of this page")
        context = {
            **self.admin_site.each_context(request),
            "title": f"Changes of {page.url}",
            "page": page,
            "a": a,
            "b": b,
            "rows": _diff_rows(_lines(a.text), _lines(b.text)),
        }
        return render(request, "admin/crawl/page_diff.html", context)


def _first_rows(queryset) -> tuple[list, bool]:
    """The first SHOWN rows, and whether there are more (one row more is read, nothing counted)."""
    rows = list(queryset[: SHOWN + 1])
    return rows[:SHOWN], len(rows) > SHOWN


def _item_table(item) -> dict:
    url = reverse("admin:scrape_item_change", args=[item.id])
    return item_table(kind=item.kind, position=item.position, data=item.data, errors=item.errors, url=url)


def _asset_row(asset) -> tuple[str, str, str]:
    note = f"{asset.kind}, {asset.state}" + (f", {asset.error_code}" if asset.error_code else "")
    return reverse("admin:media_mediaasset_change", args=[asset.id]), asset.url, note


def _plain_text(text: str, status: int = 200) -> HttpResponse:
    response = HttpResponse(text, content_type="text/plain; charset=utf-8", status=status)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


def _decoded(body: bytes, headers: dict) -> str:
    """The body in the charset its Content-Type names (UTF-8 when none or unknown), bad bytes replaced."""
    charset = parse_header_parameters(headers.get("content-type", ""))[1].get("charset") or "utf-8"
    try:
        return body.decode(charset, "replace")
    except (LookupError, ValueError):  # an unknown name; a codec that only allows strict errors
        return body.decode("utf-8", "replace")


@admin.register(FailedPage)
class FailedPageAdmin(FrontierAdmin):
    list_display = ("url", "project", "error_code", "message", "status_code", "attempts", "host", "updated_at")
    list_filter = (
        recent_values_filter("error_code", "error code"),
        recent_values_filter("host", "host"),
        PROJECT_FILTER,
    )
    actions = ("retry_pages", "retry_projects")

    def get_queryset(self, request):
        return super().get_queryset(request).filter(**FAILED)

    @admin.action(description="Retry every failed page of the selected rows' projects", permissions=["run"])
    def retry_projects(self, request, queryset):
        projects = Project.objects.filter(id__in=queryset.values("project_id"))  # rows of the user's projects
        count = sum(
            jobs.crawl_retry_failed(project=p, trigger=Job.Trigger.ADMIN, user=request.user)[1] for p in projects
        )
        self.message_user(request, f"{count} failed pages queued again.", messages.SUCCESS)


@admin.register(Host)
class HostAdmin(AllProjectsAdmin):
    list_display = (
        "host",
        "blocked",
        "blocked_reason",
        "next_allowed_at",
        "backoff_until",
        "crawl_delay",
        "min_delay",
        "max_in_flight",
        "backoff_status",
        "updated_at",
    )
    list_filter = ("blocked",)
    search_fields = ("host",)
    show_full_result_count = False
    paginator = CappedPaginator
    readonly_fields = ("next_allowed_at", "backoff_until", "crawl_delay", "last_status", "updated_at")
    actions = ("block_hosts", "unblock_hosts")

    @admin.display(description="back-off status", ordering="last_status")
    def backoff_status(self, obj):
        """The status of the host's last back-off (429 or 503 with Retry-After): the only status the
        row keeps; a page's own status is on the page."""
        return obj.last_status or "none"

    @admin.action(description="Block selected hosts (their pages fail as host_blocked)", permissions=["change"])
    def block_hosts(self, request, queryset):
        hosts = list(queryset.values_list("host", flat=True))
        for host in hosts:
            host_block(host=host, reason=f"blocked by {request.user} in the admin")
        self.message_user(request, f"{len(hosts)} hosts blocked.", messages.SUCCESS)

    @admin.action(description="Unblock selected hosts (and retry their host_blocked pages)", permissions=["change"])
    def unblock_hosts(self, request, queryset):
        hosts = list(queryset.values_list("host", flat=True))
        published = sum(host_unblock(host=host) for host in hosts)
        self.message_user(request, f"{len(hosts)} hosts unblocked, {published} pages published.", messages.SUCCESS)


@admin.register(RobotsTxt)
class RobotsTxtAdmin(AllProjectsAdmin):
    list_display = ("origin", "status_code", "error", "fetched_at")
    search_fields = ("origin",)
    show_full_result_count = False


def _lines(text: str) -> list[str]:
    """Visible text has no line breaks of its own: one sentence a line keeps diffs readable."""
    return [line for line in re.split(r"(?<=[.!?])\s+", text) if line]


def _diff_rows(old: list[str], new: list[str]) -> list[tuple[str, int | None, int | None, str]]:
    """The changes as (kind, old line number, new line number, text) rows, kind "del", "add" or "same"
    (three lines of context), with a "gap" row where unchanged lines are left out."""
    rows = []
    for group in difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(3):
        _, i1, _, j1, _ = group[0]
        if i1 or j1:
            rows.append(("gap", i1 + 1, j1 + 1, ""))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows += [("same", i + 1, j + 1, old[i]) for i, j in zip(range(i1, i2), range(j1, j2), strict=True)]
                continue
            rows += [("del", i + 1, None, old[i]) for i in range(i1, i2)]
            rows += [("add", None, j + 1, new[j]) for j in range(j1, j2)]
    return rows
