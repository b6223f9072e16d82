"""Admin for projects and seeds (with their actions and exports); the frontier's admin is in
console/admin/frontier.py, jobs in console/admin/jobs.py, the live dashboard in console/dashboard.py."""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseBadRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from console import jobs
from console.admin.sinks import SinkInline
from console.exports import CONTENT_TYPES, FIELDS, export_response
from console.models import Job
from console.selectors import project_progress
from crawl.models import Project, Seed
from crawl.services.projects import seed_problem, seeds_add
from scrape.models import RuleSet


class SeedForm(forms.ModelForm):
    """Seeds are checked like every URL the crawler would fetch; a refused one says why."""

    class Meta:
        model = Seed
        fields = ("url", "kind", "active", "priority", "method", "body", "headers")

    def __init__(self, *args, project: Project | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.project = project

    def clean_url(self):
        url = self.cleaned_data["url"]
        # The project being edited, with the allow_private just submitted (also before its first save).
        project = self.project or (self.instance.project if self.instance.project_id else None)
        problem = seed_problem(url, allow_private=bool(project and project.allow_private))
        if problem:
            raise forms.ValidationError(problem)
        return url


class SeedFormSet(forms.BaseInlineFormSet):
    def get_form_kwargs(self, index):
        return {**super().get_form_kwargs(index), "project": self.instance}


class SeedInline(admin.TabularInline):
    model = Seed
    form = SeedForm
    formset = SeedFormSet
    extra = 1


class RuleSetInline(admin.StackedInline):
    model = RuleSet
    extra = 0
    readonly_fields = ("version",)


class ProjectForm(forms.ModelForm):
    bulk_seeds = forms.CharField(
        required=False,
        label="Paste seeds",
        widget=forms.Textarea(attrs={"rows": 4, "cols": 90}),
        help_text="More start URLs, one per line, checked like the seeds below; seeds already there are kept.",
    )

    class Meta:
        model = Project
        fields = ("name",)  # the admin builds the form with its fieldsets' fields

    def clean(self):
        cleaned = super().clean()
        urls, problems = [], []
        allow_private = bool(cleaned.get("allow_private"))
        for number, line in enumerate((cleaned.get("bulk_seeds") or "").splitlines(), start=1):
            url = line.strip()
            if not url:
                continue
            problem = seed_problem(url, allow_private=allow_private)
            if problem:
                problems.append(f"line {number}: {url}: {problem}")
            urls.append(url)
        if problems:
            self.add_error("bulk_seeds", problems)
        cleaned["pasted_seeds"] = urls
        return cleaned


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    form = ProjectForm
    list_display = ("name", "slug", "status", "current_job", "open_links", "export_links", "created_at")
    list_filter = ("status",)
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [SeedInline, RuleSetInline, SinkInline]
    readonly_fields = ("frontier",)
    fieldsets = (
        (None, {"fields": ("name", "slug", "status", "frontier")}),
        ("Seeds", {"fields": ("bulk_seeds",)}),
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

    actions = ("start", "pause", "resume", "cancel", "recrawl_now", "retry_failed", "reextract", "export_pages")

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        pasted = form.cleaned_data.get("pasted_seeds")
        if pasted:
            new = seeds_add(project=form.instance, urls=pasted)
            self.message_user(request, f"{len(pasted)} pasted seeds kept, {len(new)} new URLs in the frontier.")

    @admin.action(description="Start: a job that queues the seeds and everything owed")
    def start(self, request, queryset):
        self._jobs(request, queryset, jobs.crawl_start, "started")

    @admin.action(description="Pause the current job (claimed batches finish, queued work waits)")
    def pause(self, request, queryset):
        count = sum(jobs.project_pause(project=project) for project in queryset)
        self.message_user(request, f"{count} projects paused.", messages.SUCCESS)

    @admin.action(description="Resume the paused job")
    def resume(self, request, queryset):
        count = sum(jobs.project_resume(project=project) for project in queryset)
        self.message_user(request, f"{count} projects resumed.", messages.SUCCESS)

    @admin.action(description="Cancel the current job (owed work stays queued; Start resumes it)")
    def cancel(self, request, queryset):
        count = sum(jobs.job_cancel(job=job, user=request.user) for job in map(jobs.job_current, queryset) if job)
        self.message_user(request, f"{count} jobs cancelled.", messages.SUCCESS)

    @admin.action(description="Recrawl now: a job fetching every finished page again (conditional GET)")
    def recrawl_now(self, request, queryset):
        self._jobs(request, queryset, jobs.crawl_recrawl, "recrawling")

    @admin.action(description="Retry failed pages: a job queueing every failed page again")
    def retry_failed(self, request, queryset):
        self._jobs(request, queryset, jobs.crawl_retry_failed, "retrying failures")

    @admin.action(description="Re-extract: a job extracting the stored pages again (no refetch)")
    def reextract(self, request, queryset):
        self._jobs(request, queryset, jobs.crawl_reextract, "re-extracting")

    def _jobs(self, request, queryset, start, verb: str) -> None:
        for project in queryset:
            job, queued = start(project=project, trigger=Job.Trigger.ADMIN, user=request.user)
            url = reverse("admin:console_job_change", args=[job.id])
            self.message_user(
                request,
                format_html('{}: <a href="{}">job {}</a> {} ({} rows queued).', project, url, job.id, verb, queued),
                messages.SUCCESS,
            )

    @admin.action(description="Export pages as JSON lines (one project)")
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
        project = get_object_or_404(Project, id=project_id)
        if not self.has_view_permission(request, project):
            raise PermissionDenied
        what, fmt = request.GET.get("what", "pages"), request.GET.get("format", "jsonl")
        if what not in FIELDS or fmt not in CONTENT_TYPES:
            return HttpResponseBadRequest("what: pages, items or assets; format: jsonl or csv")
        return export_response(project, what=what, fmt=fmt)


def _export_url(project: Project, what: str, fmt: str) -> str:
    return reverse("admin:crawl_project_export", args=[project.id]) + f"?format={fmt}&what={what}"
