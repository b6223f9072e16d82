"""Admin for monitoring: each project's monitors with their thresholds, the alerts they raised,
and where alerts are sent (Apprise URLs, set by admins only) with a "send a test" action."""

import json

from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from console.access.policy import sees_all
from console.admin.access import PROJECT_FILTER, AllProjectsAdmin, ProjectScopedAdmin
from console.health.models import Alert, Monitor, NotificationTarget
from console.health.monitors import monitor_thresholds
from console.health.notify import notification_test, shown_url
from console.health.validators import DEFAULTS, RULES


@admin.register(Monitor)
class MonitorAdmin(ProjectScopedAdmin):
    """Every project has each built-in monitor (made by the monitors' tick): change its thresholds.
    Add a rule of your own: its kind, name, what it watches, threshold and window."""

    list_display = ("project", "title", "kind", "enabled", "urgent", "in_effect", "cooldown_minutes")
    list_filter = ("kind", "enabled", PROJECT_FILTER)
    list_select_related = ("project",)
    BUILT_IN_FIELDS = ("project", "kind", "enabled", "urgent", "thresholds", "defaults", "cooldown_minutes")
    RULE_FIELDS = ("project", "kind", "name", "enabled", "urgent", "watch", "threshold", "window_minutes",
                   "cooldown_minutes", "kinds_help")  # fmt: skip

    def get_fields(self, request, obj=None):
        return self.BUILT_IN_FIELDS if obj is not None and obj.built_in else self.RULE_FIELDS

    def get_readonly_fields(self, request, obj=None):
        return ("project", "kind", "defaults", "kinds_help") if obj is not None else ("kinds_help",)

    def formfield_for_choice_field(self, db_field, request, **kwargs):
        if db_field.name == "kind":  # a new monitor is a rule of one's own: the built-in ones exist already
            kwargs["choices"] = [(k, v) for k, v in Monitor.Kind.choices if k in RULES]
        return super().formfield_for_choice_field(db_field, request, **kwargs)

    def has_delete_permission(self, request, obj=None) -> bool:
        return (obj is None or not obj.built_in) and super().has_delete_permission(request, obj)

    @admin.display(description="monitor")
    def title(self, monitor: Monitor) -> str:
        return monitor.title

    @admin.display(description="thresholds in effect")
    def in_effect(self, monitor: Monitor) -> str:
        return json.dumps(monitor_thresholds(monitor)) if monitor.kind in DEFAULTS or monitor.kind in RULES else "-"

    @admin.display(description="defaults")
    def defaults(self, monitor: Monitor) -> str:
        return json.dumps(DEFAULTS.get(monitor.kind, {}))

    @admin.display(description="the kinds")
    def kinds_help(self, monitor: Monitor | None) -> str:
        return format_html_join(
            "", "<p><b>{}</b>: watch {}; threshold in {}{}</p>",
            ((Monitor.Kind(k).label, r.watch or "nothing", r.unit, "; window in minutes" if r.windowed else "")
             for k, r in RULES.items()),
        )  # fmt: skip


@admin.register(Alert)
class AlertAdmin(ProjectScopedAdmin):
    list_display = ("when", "project", "kind", "subject", "state", "message_short")
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

    @admin.display(description="since", ordering="since")
    def when(self, alert: Alert) -> str:
        return f"{alert.since:%m-%d %H:%M} UTC"

    @admin.display(description="state")
    def state(self, alert: Alert) -> str:
        told = "" if alert.notified_at else ", not announced"
        return ("open" if alert.open else f"recovered {alert.resolved_at:%H:%M}") + told

    @admin.display(description="announced", boolean=True)
    def announced(self, alert: Alert) -> bool:
        return alert.notified_at is not None

    @admin.display(description="what was seen")
    def message_short(self, alert: Alert) -> str:
        """One line: the whole message is its tooltip and the alert's own page; a template change
        links to the spider debugger on one of its sample pages."""
        message = format_html('<span class="alert-message" title="{}">{}</span>', alert.message, alert.message)
        if not (alert.evidence or {}).get("sample_pages"):
            return message
        url = f"{reverse('admin-debugger')}?alert={alert.id}"
        link = '<a class="replay" href="{}" title="open a sample page in the spider debugger">debug</a>'
        return format_html("{} " + link, message, url)


@admin.register(NotificationTarget)
class NotificationTargetAdmin(AllProjectsAdmin):
    """Alerts are sent to these addresses from the workers, not through the crawl's egress guard:
    only users who see every project and may change network settings manage them."""

    list_display = ("name", "project", "target", "enabled", "quiet_hours")
    list_filter = ("enabled", "project")
    fields = ("project", "name", "url", "enabled", "quiet_from", "quiet_until", "quiet_timezone")
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

    @admin.display(description="quiet hours")
    def quiet_hours(self, row: NotificationTarget) -> str:
        if row.quiet_from is None or row.quiet_until is None:
            return "-"
        return f"{row.quiet_from:%H:%M}-{row.quiet_until:%H:%M} {row.quiet_timezone}"

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
