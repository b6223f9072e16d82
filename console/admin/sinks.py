"""Admin for result sinks: configured inline on their project, and listed with what each delivered,
what it owes and why it fails (with a retry of its failed records)."""

import json

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.utils.html import format_html

from console.access.policy import NETWORK_SINK_KINDS, may, network_refusal
from console.admin.access import PROJECT_FILTER, ProjectScopedAdmin
from console.masking import masked_config, unmasked_config
from sinks.delivery import sink_counts, sink_last_error, sink_retry
from sinks.models import Sink


class NetworkSinkForm(forms.ModelForm):
    """A redis or python sink reaches into networks or runs code: making or changing one needs the
    network settings permission (`user` is set by the admin that builds the form). The credentials in
    a config's "url" are shown masked; left masked, they keep the stored ones."""

    user = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "config" in self.fields:
            self.initial["config"] = masked_config(self.instance.config)

    def clean_config(self):
        return unmasked_config(self.cleaned_data["config"], self.instance.config)

    def clean(self):
        cleaned = super().clean()
        kind, config = cleaned.get("kind", self.instance.kind), cleaned.get("config", self.instance.config)
        unchanged = self.instance.pk and (self.instance.kind, self.instance.config) == (kind, config)
        if kind in NETWORK_SINK_KINDS and not unchanged and not may(self.user, "network"):
            raise ValidationError(network_refusal([f"a {kind} sink"]))
        return cleaned


def _form_for(form_class, request):
    return type(form_class.__name__, (form_class,), {"user": request.user})


class MaskedConfigMixin:
    """Read-only (a user who may not change the sink), the config is shown with its credentials masked."""

    def get_fields(self, request, obj=None):
        fields = [f for f in super().get_fields(request, obj) if f != "config_masked"]
        if self.has_change_permission(request, obj):
            return fields
        return ["config_masked" if f == "config" else f for f in fields]

    @admin.display(description="config")
    def config_masked(self, sink):
        return json.dumps(masked_config(sink.config), ensure_ascii=False)


class SinkInline(MaskedConfigMixin, admin.StackedInline):
    model = Sink
    form = NetworkSinkForm
    extra = 0
    fields = ("name", "kind", "config", "items", "pages", "assets", "active")
    readonly_fields = ("config_masked",)

    def get_formset(self, request, obj=None, **kwargs):
        return super().get_formset(request, obj, **{**kwargs, "form": _form_for(self.form, request)})


@admin.register(Sink)
class SinkAdmin(MaskedConfigMixin, ProjectScopedAdmin):
    form = NetworkSinkForm
    list_display = ("name", "project", "kind", "active", "delivered", "owed", "failed", "last_error")
    list_filter = ("kind", "active", PROJECT_FILTER)
    fields = ("project", "name", "kind", "config", "items", "pages", "assets", "active")
    readonly_fields = ("config_masked",)
    actions = ("retry_failed",)

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("project")

    def get_form(self, request, obj=None, change=False, **kwargs):
        return super().get_form(request, obj, change, **{**kwargs, "form": _form_for(self.form, request)})

    @admin.display(description="delivered")
    def delivered(self, obj):
        return _counts(obj)["done"]

    @admin.display(description="owed")
    def owed(self, obj):
        counts = _counts(obj)
        return counts["pending"] + counts["leased"]

    @admin.display(description="failed")
    def failed(self, obj):
        return _counts(obj)["failed"]

    @admin.display(description="last error")
    def last_error(self, obj):
        error = sink_last_error(obj)
        return format_html('<span title="{}">{}</span>', error, error[:160]) if error else "-"

    @admin.action(description="Retry the failed records of the selected sinks", permissions=["run"])
    def retry_failed(self, request, queryset):
        count = sum(sink_retry(sink) for sink in queryset)
        self.message_user(request, f"{count} failed records queued again.", messages.SUCCESS)


def _counts(sink: Sink) -> dict[str, int]:
    """The sink's records by state, counted once per row of the list (three columns show them)."""
    if not hasattr(sink, "_state_counts"):
        sink._state_counts = sink_counts(sink)
    return sink._state_counts
