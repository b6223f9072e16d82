"""Admin for the projects' proxy pools: each proxy's state, score, counts and rest, its URL with the
password masked. Adding or changing one is a network setting (console.change_network_settings); a
URL sent back still masked keeps the stored password."""

from django import forms
from django.contrib import admin, messages
from django.utils import timezone

from console.access.policy import may
from console.admin.access import PROJECT_FILTER, ProjectScopedAdmin
from console.masking import masked_url, unmasked_url
from crawl.models import ProjectProxy
from fetch.proxy_pool import proxy_back_in_service, proxy_state


class ProxyForm(forms.ModelForm):
    class Meta:
        model = ProjectProxy
        fields = ("project", "url", "active")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["url"] = masked_url(self.instance.url)

    def clean_url(self):
        return unmasked_url(self.cleaned_data["url"], self.instance.url if self.instance.pk else "")


@admin.register(ProjectProxy)
class ProjectProxyAdmin(ProjectScopedAdmin):
    form = ProxyForm
    list_display = ("shown_url", "project", "state", "health", "uses", "errors", "blocks", "latency", "rested_until")
    list_filter = ("active", PROJECT_FILTER)
    readonly_fields = ("shown_url", "state", "health", "uses", "errors", "blocks", "latency", "rested_until")
    readonly_fields += ("last_used_at", "last_error")
    actions = ("back_in_service",)

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("project")

    def get_fields(self, request, obj=None):
        editable = (
            ("project", "url", "active") if self.has_change_permission(request, obj) else ("project", "shown_url")
        )
        return (*editable, *self.readonly_fields[1:])

    def has_add_permission(self, request) -> bool:
        return may(request.user, "network") and super().has_add_permission(request)

    def has_change_permission(self, request, obj=None) -> bool:
        return may(request.user, "network") and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        return may(request.user, "network") and super().has_delete_permission(request, obj)

    @admin.display(description="proxy")
    def shown_url(self, obj):
        return obj.shown_url

    @admin.display(description="state")
    def state(self, obj):
        return proxy_state(obj, timezone.now())

    @admin.display(description="score", ordering="score")
    def health(self, obj):
        return f"{obj.score:.0f}"

    @admin.display(description="latency", ordering="latency_ms")
    def latency(self, obj):
        return f"{obj.latency_ms:.0f} ms" if obj.latency_ms is not None else "-"

    @admin.action(description="Back in service now (end their rests)", permissions=["change"])
    def back_in_service(self, request, queryset):
        count = proxy_back_in_service(proxies=queryset)
        self.message_user(request, f"{count} proxies back in service.", messages.SUCCESS)
