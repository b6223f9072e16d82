"""Admin for jobs: each project's run history, and one job's counts, errors, failing URLs and log,
with Pause / Resume / Cancel / Retry failed (for users who may run the project)."""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.utils.html import format_html

from console.access.policy import may
from console.admin.access import PROJECT_FILTER, ProjectScopedAdmin
from console.models import Job, JobLogEntry, WorkerBeat
from console.runs import jobs, steering


@admin.register(Job)
class JobAdmin(ProjectScopedAdmin):
    list_display = ("id", "project", "kind", "state_badge", "trigger", "who", "created_at", "finished_at", "summary")
    list_filter = ("state", "kind", "trigger", PROJECT_FILTER)
    list_select_related = ("project", "started_by")
    date_hierarchy = "created_at"
    change_form_template = "admin/console/job/change_form.html"
    # What happened first (its state, why, the report); who and when below, folded.
    fieldsets = (
        (None, {"fields": ("project", "state", "message", "report")}),
        ("Details", {"classes": ("collapse",), "fields": ("kind", "trigger", "started_by", "retry_of", "created_at",
                                                           "started_at", "finished_at")}),
    )  # fmt: skip
    readonly_fields = ("project", "kind", "state", "trigger", "started_by", "retry_of", "created_at", "started_at",
                       "finished_at", "message", "report")  # fmt: skip

    def has_add_permission(self, request):
        return False  # jobs are begun by Start, schedules and commands

    def has_change_permission(self, request, obj=None):
        return False  # read-only page; the buttons are the job actions

    @admin.display(description="state", ordering="state")
    def state_badge(self, obj):
        return format_html('<span class="job-state job-{}">{}</span>', obj.state, obj.state)

    @admin.display(description="by")
    def who(self, obj):
        return obj.started_by or obj.get_trigger_display()

    @admin.display(description="pages done / failed, rate")
    def summary(self, obj):
        counts = jobs.job_counts(obj) if obj.stats or obj.active else {}
        if not counts:
            return "-"
        return f"{counts['pages_done']} / {counts['pages_failed']}, {counts['pages_per_second']:.1f}/s"

    @admin.display(description="report")
    def report(self, obj):
        counts = jobs.job_counts(obj)
        context = {
            "job": obj,
            "counts": counts,
            "stages": [
                (
                    "fetch",
                    f"{counts['pages_done']} pages done, {counts['pages_failed']} failed, "
                    f"{counts['pages_pending']} owed",
                ),
                ("extract", f"{counts['items']} items"),
                ("download", f"{counts['assets_done']} assets stored, {counts['assets_failed']} failed"),
                ("bytes", f"{counts['bytes']:,}"),
                ("rate", f"{counts['pages_per_second']:.2f} pages/s over {counts['seconds']:.0f} s"),
            ],
            "failures": jobs.job_failures(obj),
            "log": JobLogEntry.objects.filter(job=obj).order_by("-id")[:200],
            "retries": obj.retries.all()[:20],
        }
        return render_to_string("admin/console/job/report.html", context)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        job = self.get_object(request, object_id)  # None (another team's, or none): the admin says so
        extra = {
            "job_actions": _actions_of(job) if job and may(request.user, "run") else [],
            "workers": WorkerBeat.objects.order_by("name"),
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, extra_context=extra)

    def get_urls(self):
        view = self.admin_site.admin_view(self.action_view)
        return [path("<int:job_id>/do/<str:action>/", view, name="console_job_action"), *super().get_urls()]

    def action_view(self, request, job_id: int, action: str):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if action not in (*steering.STEERS, "retry") or not may(request.user, "run"):
            raise PermissionDenied
        job = get_object_or_404(self.get_queryset(request), id=job_id)
        if action == "retry":
            result = jobs.job_retry_failed(job=job, trigger=Job.Trigger.ADMIN, user=request.user)[0]
        else:
            result = steering.job_steer(job=job, action=action, user=request.user)
        if isinstance(result, Job):
            self.message_user(request, f"Failures of job {job.id} retried as job {result.id}.", messages.SUCCESS)
            return HttpResponseRedirect(reverse("admin:console_job_change", args=[result.id]))
        level = messages.SUCCESS if result else messages.WARNING
        self.message_user(request, f"job {job.id}: {action} {'done' if result else 'not possible now'}.", level)
        return HttpResponseRedirect(reverse("admin:console_job_change", args=[job.id]))


def _actions_of(job: Job) -> list[tuple[str, str]]:
    actions = [(action, action.capitalize()) for action in steering.job_actions(job)]
    return actions + ([("retry", "Retry failed")] if jobs.job_has_failures(job) else [])


@admin.register(WorkerBeat)
class WorkerBeatAdmin(admin.ModelAdmin):
    list_display = ("name", "queues", "concurrency", "pid", "started_at", "seen_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
