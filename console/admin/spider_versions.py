"""Admin for spider code: its versions (read-only; deploying one is the add form, activating an
older one the "activate" action) and its checks. Both need scrape.deploy_spider, the admin role's."""

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html
from django_ace import AceWidget

from console.access.policy import projects_for
from console.admin.access import PROJECT_FILTER, ProjectScopedAdmin
from scrape.models import SpiderCheck, SpiderVersion
from scrape.spider_code import SpiderCodeError
from scrape.spider_versions import spider_version_activate, spider_version_deploy, spider_version_vet

DEPLOY = "scrape.deploy_spider"


class DeployForm(forms.ModelForm):
    force = forms.BooleanField(required=False, help_text="Deploy even if the project's checks fail.")

    class Meta:
        model = SpiderVersion
        fields = ("project", "source", "message")
        widgets = {  # the debugger's editor: highlighting and line numbers, Ace served from static (no CDN)
            "source": AceWidget(
                mode="python", width="100%", height="520px", useworker=False, showprintmargin=False, tabsize=4
            )
        }

    def clean(self):
        """The deploy's own checks, shown beside the code: compiled, one spider, its routes, its checks."""
        cleaned = super().clean()
        if cleaned.get("project") is not None and cleaned.get("source"):
            try:
                spider_version_vet(project=cleaned["project"], source=cleaned["source"], force=cleaned.get("force"))
            except SpiderCodeError as exc:
                raise forms.ValidationError({"source": str(exc)}) from None
        return cleaned


@admin.register(SpiderVersion)
class SpiderVersionAdmin(ProjectScopedAdmin):
    """Versions are immutable: the add form deploys a new one, the action points a project back at one."""

    list_display = ("__str__", "project", "spider_name", "is_active", "message", "created_by", "created_at")
    list_filter = (PROJECT_FILTER,)
    list_select_related = ("project", "created_by")
    actions = ("activate",)
    readonly_fields = ("project", "number", "spider_name", "sha256", "message", "created_by", "created_at", "code")
    form = DeployForm

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("project", "source", "message", "force")
        return self.readonly_fields

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "project":
            kwargs["queryset"] = projects_for(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_add_permission(self, request) -> bool:
        return request.user.has_perm(DEPLOY)

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def has_deploy_permission(self, request) -> bool:
        return request.user.has_perm(DEPLOY)

    def save_model(self, request, obj, form, change) -> None:
        data = form.cleaned_data
        version = spider_version_deploy(
            project=data["project"], source=data["source"], message=data["message"], user=request.user, force=True
        )  # vetted by the form (with its checks unless forced)
        obj.pk, obj.number, obj._state.adding = version.pk, version.number, False

    @admin.display(boolean=True, description="active")
    def is_active(self, obj) -> bool:
        return obj.project.spider_version_id == obj.id

    @admin.display(description="source")
    def code(self, obj):
        return format_html("<pre>{}</pre>", obj.source)

    @admin.action(description="Activate the selected version (roll back or forward)", permissions=["deploy"])
    def activate(self, request, queryset) -> None:
        versions = list(queryset.select_related("project"))
        if len(versions) != 1:
            self.message_user(request, "Choose exactly one version to activate.", messages.WARNING)
            return
        version = versions[0]
        spider_version_activate(project=version.project, version=version)
        self.message_user(
            request, f"{version.project.slug} now runs spider version {version.number}.", messages.SUCCESS
        )


@admin.register(SpiderCheck)
class SpiderCheckAdmin(ProjectScopedAdmin):
    """Checks are kept from the debugger; `manage.py spider check` runs them."""

    list_display = ("name", "project", "url", "status", "created_by", "created_at")
    list_filter = (PROJECT_FILTER,)
    list_select_related = ("project", "created_by")
    fields = ("project", "name", "url", "status", "headers", "request", "expected_items", "created_by", "created_at")
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return request.user.has_perm(DEPLOY) and super().has_delete_permission(request, obj)
