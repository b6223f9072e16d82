"""Admin for monitoring: each project's monitors with their thresholds, the alerts they raised,
and where alerts are sent (Apprise URLs, set by admins only) with a "send a test" action."""

import json

from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html

from console.access import sees_all
from console.admin.access import PROJECT_FILTER, AllProjectsAdmin, ProjectScopedAdmin
from console.health_models import Alert, Monitor, NotificationTarget
from console.monitors import DEFAULTS, monitor_thresholds
from console.notify import notification_test, shown_url


@admin.register(Monitor)
class MonitorAdmin(ProjectScopedAdmin):
    """Every project has each built-in monitor (made by the monitors' tick); change its thresholds."""

    list_display = ("project", "kind", "enabled", "in_effect", "cooldown_minutes")
    list_filter = ("kind", "enabled", PROJECT_FILTER)
    list_select_related = ("project",)
    fields = ("project", "kind", "enabled", "thresholds", "defaults", "cooldown_minutes")
    readonly_fields = ("project", "kind", "defaults")

    def has_add_permission(self, request) -> bool:
        return False  # built in: one of each kind per project

    @admin.display(description="thresholds in effect")
    def in_effect(self, monitor: Monitor) -> str:
        return json.dumps(monitor_thresholds(monitor)) if monitor.kind in DEFAULTS else "-"

    @admin.display(description="defaults")
    def defaults(self, monitor: Monitor) -> str:
        return json.dumps(DEFAULTS.get(monitor.kind, {}))


@admin.register(Alert)
class AlertAdmin(ProjectScopedAdmin):
    list_display = (
        "since", "project", "kind", "subject", "state", "resolved_at", "announced", "message_short", "replay",
    )  # fmt: skip
    list_filter = ("monitor__kind", ("resolved_at", admin.EmptyFieldListFilter), PROJECT_FILTER)
    list_select_related = ("project", "monitor")
    search_fields = ("subject", "message")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="monitor")
    def kind(self, alert: Alert) -> str:
        return alert.monitor.get_kind_display()

    @admin.display(description="state")
    def state(self, alert: Alert) -> str:
        return "open" if alert.open else "recovered"

    @admin.display(description="announced", boolean=True)
    def announced(self, alert: Alert) -> bool:
        return alert.notified_at is not None

    @admin.display(description="debugger")
    def replay(self, alert: Alert) -> str:
        """A template change opens the spider debugger on one of its sample pages."""
        if not (alert.evidence or {}).get("sample_pages"):
            return "-"
        url = f"{reverse('admin-debugger')}?alert={alert.id}"
        return format_html('<a class="replay" href="{}">open a sample page in the debugger</a>', url)

    @admin.display(description="what was seen")
    def message_short(self, alert: Alert) -> str:
        return format_html('<span title="{}">{}</span>', alert.message, alert.message[:160])


@admin.register(NotificationTarget)
class NotificationTargetAdmin(AllProjectsAdmin):
    """Alerts are sent to these addresses from the workers, not through the crawl's egress guard:
    only users who see every project and may change network settings manage them."""

    list_display = ("name", "project", "target", "enabled")
    list_filter = ("enabled", "project")
    fields = ("project", "name", "url", "enabled")
    actions = ("send_test",)

    def has_module_permission(self, request) -> bool:
        return _admin_only(request) and super().has_module_permission(request)

    def has_view_permission(self, request, obj=None) -> bool:
        return _admin_only(request) and super().has_view_permission(request, obj)

    def has_change_permission(self, request, obj=None) -> bool:
        return _admin_only(request) and super().has_change_permission(request, obj)

    def has_add_permission(self, request) -> bool:
        return _admin_only(request) and super().has_add_permission(request)

    @admin.display(description="target")
    def target(self, row: NotificationTarget) -> str:
        return shown_url(row.url)

    @admin.action(description="Send a test notification to the selected targets")
    def send_test(self, request, queryset):
        for row in queryset.select_related("project"):
            problems = notification_test(project=row.project, urls=[row.url], email=False)
            if problems:
                self.message_user(request, f"{row.name}: {'; '.join(problems)}", messages.ERROR)
            else:
                self.message_user(request, f"{row.name}: test notification sent.", messages.SUCCESS)


def _admin_only(request) -> bool:
    return sees_all(request.user) and request.user.has_perm("console.change_network_settings")
