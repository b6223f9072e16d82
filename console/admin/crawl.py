"""Admin for projects (with their actions and exports; the change form's parts are in
console/admin/project_forms.py); the frontier's admin is in console/admin/frontier.py, jobs in
console/admin/jobs.py, the live dashboard in console/dashboard.py. Each user sees the projects they
may (console/access/policy.py); network settings are read-only without the permission, secrets masked."""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseBadRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from console.access.policy import NETWORK_FIELDS, may, network_scope_fields, project_owner_add
from console.admin.access import ProjectScopedAdmin
from console.admin.project_forms import (
    SECRETS,
    OwnerInline,
    ProjectForm,
    RuleSetInline,
    SeedInline,
    masked,
    robots_sitemaps,
)
from console.admin.session_pool import sessions_table
from console.admin.sinks import SinkInline
from console.exports.rows import CONTENT_TYPES, FIELDS, export_response
from console.masking import MASK
from console.models import Job
from console.runs import jobs, steering
from console.selectors import project_progress
from crawl.models import Project
from fetch.cookies import session_forget

MASKED = {name: f"masked_{name}" for name in SECRETS}  # a secret field -> its masked, read-only display


@admin.register(Project)
class ProjectAdmin(ProjectScopedAdmin):
    form = ProjectForm
    project_path = "pk"
    list_display = ("name", "slug", "status", "current_job", "open_links", "export_links", "created_at")
    list_filter = ("status",)
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [SeedInline, RuleSetInline, SinkInline, OwnerInline]
    readonly_fields = ("frontier", "robots_sitemaps", "session", "cookie_sessions", *MASKED.values())
    fieldsets = (
        (None, {"fields": ("name", "slug", "status", "weight", "frontier")}),
        # The seeds table follows this fieldset (templates/admin/crawl/project/change_form.html), so
        # a seed refused for its private address is shown next to the checkbox that allows it.
        ("Seeds", {"fields": ("bulk_seeds", "robots_sitemaps", "allow_private")}),
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
            {
                "fields": (
                    *("obey_robots", "min_delay", "max_per_host", "politeness_group"),
                    *("concurrency", "rate_limit", "rate_burst"),
                )
            },
        ),
        ("Blocks", {"fields": ("block_detection", "block_rules")}),
        (
            "Requests",
            {
                "fields": (
                    "user_agent",
                    "request_headers",
                    "cookies",
                    "keep_cookies",
                    "session",
                    "proxy",
                )
            },
        ),
        (
            "Sessions",
            {
                "fields": (
                    "session_pool_size",
                    "session_login_url",
                    "session_expired_selector",
                    "session_retire_statuses",
                    "session_max_uses",
                    "session_max_errors",
                    "session_per_host",
                    "proxy_per_session",
                    "cookie_sessions",
                )
            },
        ),
        ("Extraction", {"fields": ("spider", "api_config", "main_text", "render_js")}),
        ("Notifications", {"fields": ("notify_job_end",)}),
        (
            "Recrawl",
            {
                "fields": (
                    "recrawl_every_minutes",
                    "recrawl_crontab",
                    "recrawl_mode",
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

    actions = (
        "start",
        "pause",
        "resume",
        "cancel",
        "recrawl_due",
        "recrawl_now",
        "retry_failed",
        "reextract",
        "forget_session",
        "export_pages",
    )

    def _edits_network(self, request, obj) -> bool:
        can_edit = self.has_change_permission(request, obj) if obj else self.has_add_permission(request)
        return can_edit and may(request.user, "network")

    def get_fieldsets(self, request, obj=None):
        """Secrets are shown masked, and only a user who may change them gets their (masked) fields."""
        fieldsets = super().get_fieldsets(request, obj)
        if self._edits_network(request, obj):
            return fieldsets
        return [(name, {**opts, "fields": [MASKED.get(f, f) for f in opts["fields"]]}) for name, opts in fieldsets]

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change, **kwargs)
        return type(form.__name__, (form,), {"user": request.user})  # pasted seeds are checked for this user

    def get_readonly_fields(self, request, obj=None):
        """A new project is created active or paused; afterwards its status is the Start, Pause and
        Resume actions' (they run its jobs: every fetch belongs to one)."""
        readonly = super().get_readonly_fields(request, obj)
        if obj is not None:
            readonly = (*readonly, "status")
        if may(request.user, "network"):
            return readonly
        return (*readonly, *NETWORK_FIELDS, *network_scope_fields(obj))

    def get_list_display(self, request):
        shown = super().get_list_display(request)
        return shown if self.has_export_permission(request) else [f for f in shown if f != "export_links"]

    @admin.display(description="sitemaps named by robots.txt")
    def robots_sitemaps(self, obj):
        return robots_sitemaps(obj)

    @admin.display(description="cookies")
    def masked_cookies(self, obj):
        return masked(obj, "cookies")

    @admin.display(description="request headers")
    def masked_request_headers(self, obj):
        return masked(obj, "request_headers")

    @admin.display(description="proxy")
    def masked_proxy(self, obj):
        return masked(obj, "proxy")

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        if not change:  # after the owners inline, which may name the creator too
            project_owner_add(project=form.instance, user=request.user)
        pasted = form.cleaned_data.get("pasted_seeds")
        if pasted:
            _job, new = steering.seeds_add_as_job(
                project=form.instance, urls=pasted, trigger=Job.Trigger.ADMIN, user=request.user
            )
            self.message_user(request, f"{len(pasted)} pasted seeds kept, {len(new)} new URLs in the frontier.")

    @admin.action(description="Start: a job that queues the seeds and everything owed", permissions=["run"])
    def start(self, request, queryset):
        self._jobs(request, queryset, steering.crawl_start, "started")

    @admin.action(
        description="Pause the current job and the recrawl schedule (claimed batches finish, queued work waits)",
        permissions=["run"],
    )
    def pause(self, request, queryset):
        count = sum(steering.project_pause(project=project) for project in queryset)
        self.message_user(request, f"{count} projects paused.", messages.SUCCESS)

    @admin.action(description="Resume the paused job", permissions=["run"])
    def resume(self, request, queryset):
        resumed = (steering.project_resume(project=p, trigger=Job.Trigger.ADMIN, user=request.user) for p in queryset)
        count = sum(r.changed for r in resumed)
        self.message_user(request, f"{count} projects resumed.", messages.SUCCESS)

    @admin.action(
        description="Cancel the current job (owed work stays queued; Start resumes it; the schedule still runs)",
        permissions=["run"],
    )
    def cancel(self, request, queryset):
        count = sum(steering.project_cancel(project=project, user=request.user) for project in queryset)
        self.message_user(request, f"{count} jobs cancelled.", messages.SUCCESS)

    @admin.action(
        description="Recrawl now: a job fetching every finished page again (conditional GET)", permissions=["run"]
    )
    def recrawl_now(self, request, queryset):
        self._jobs(request, queryset, jobs.crawl_recrawl, "recrawling")

    @admin.action(description="Recrawl due: a job fetching again the pages whose revisit is due", permissions=["run"])
    def recrawl_due(self, request, queryset):
        self._jobs(request, queryset, jobs.crawl_recrawl_due, "recrawling what is due")

    @admin.action(description="Retry failed pages: a job queueing every failed page again", permissions=["run"])
    def retry_failed(self, request, queryset):
        self._jobs(request, queryset, jobs.crawl_retry_failed, "retrying failures")

    @admin.action(description="Re-extract: a job extracting the stored pages again (no refetch)", permissions=["run"])
    def reextract(self, request, queryset):
        self._jobs(request, queryset, jobs.crawl_reextract, "re-extracting")

    @admin.action(description="Forget the session: delete the cookies the sites set (log out)", permissions=["run"])
    def forget_session(self, request, queryset):
        count = sum(session_forget(project=project) for project in queryset)
        self.message_user(request, f"{count} session cookies deleted.", messages.SUCCESS)

    @admin.display(description="session cookies")
    def session(self, obj):
        """The cookies the project's sites set, their values masked."""
        rows = list(obj.session_cookies.order_by("domain", "path", "name")) if obj.pk else []
        if not rows:
            return "none"
        return format_html_join(
            format_html("<br>"), "{}={} ({}{}, {})", ((c.name, MASK, c.domain, c.path, _until(c)) for c in rows)
        )

    @admin.display(description="cookie sessions")
    def cookie_sessions(self, obj):
        """The project's pool of sessions: state, age, uses, errors, cookies masked."""
        return sessions_table(obj) if obj.pk else "none"

    def _jobs(self, request, queryset, start, verb: str) -> None:
        for project in queryset:
            try:
                job, queued = start(project=project, trigger=Job.Trigger.ADMIN, user=request.user)
            except steering.ProjectFinished as finished:
                self.message_user(request, f"{finished} (the actions Recrawl due and Recrawl now)", messages.WARNING)
                continue
            url = reverse("admin:console_job_change", args=[job.id])
            self.message_user(
                request,
                format_html('{}: <a href="{}">job {}</a> {} ({} rows queued).', project, url, job.id, verb, queued),
                messages.SUCCESS,
            )

    @admin.action(description="Export pages as JSON lines (one project)", permissions=["export"])
    def export_pages(self, request, queryset):
        projects = list(queryset[:2])
        if len(projects) != 1:
            self.message_user(request, "Choose exactly one project to export.", messages.WARNING)
            return None
        return HttpResponseRedirect(_export_url(projects[0], "pages", "jsonl"))

    @admin.display(description="Frontier by state")
    def frontier(self, obj):
        counts = project_progress(obj)["pages"] if obj.pk else {}
        return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "empty"

    @admin.display(description="job")
    def current_job(self, obj):
        job = jobs.job_current(obj)
        if job is None:
            return "-"
        return format_html(
            '<a href="{}">{} {}</a>', reverse("admin:console_job_change", args=[job.id]), job.id, job.state
        )

    @admin.display(description="open")
    def open_links(self, obj):
        url = reverse("admin-dashboard") + f"?project={obj.id}"
        pages = reverse("admin:crawl_page_changelist") + f"?project__id__exact={obj.id}"
        history = reverse("admin:console_job_changelist") + f"?project__id__exact={obj.id}"
        return format_html(
            '<a href="{}">dashboard</a> · <a href="{}">pages</a> · <a href="{}">jobs</a>', url, pages, history
        )

    @admin.display(description="export")
    def export_links(self, obj):
        links = [(_export_url(obj, what, fmt), f"{what}.{fmt}") for what in FIELDS for fmt in CONTENT_TYPES]
        return format_html_join(" ", '<a href="{}">{}</a>', links)

    def get_urls(self):
        view = self.admin_site.admin_view(self.export_view)
        return [path("<int:project_id>/export/", view, name="crawl_project_export"), *super().get_urls()]

    def export_view(self, request, project_id: int):
        """?format=jsonl|csv&what=pages|items|assets, streamed: the rows are never all in memory."""
        project = get_object_or_404(self.get_queryset(request), id=project_id)
        if not self.has_export_permission(request):
            raise PermissionDenied
        what, fmt = request.GET.get("what", "pages"), request.GET.get("format", "jsonl")
        if what not in FIELDS or fmt not in CONTENT_TYPES:
            return HttpResponseBadRequest("what: pages, items or assets; format: jsonl or csv")
        return export_response(project, what=what, fmt=fmt)


def _export_url(project: Project, what: str, fmt: str) -> str:
    return reverse("admin:crawl_project_export", args=[project.id]) + f"?format={fmt}&what={what}"


def _until(cookie) -> str:
    return f"until {cookie.expires_at:%Y-%m-%d %H:%M} UTC" if cookie.expires_at else "until the session is forgotten"
