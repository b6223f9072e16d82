"""Admin for items and rule sets, and the "Try a URL" debugger page."""

import json

from django import forms
from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.shortcuts import render

from crawl.models import Project
from scrape.debugger import trial_report, try_url
from scrape.models import Item, RuleSet


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ("id", "project", "page", "kind", "position", "rule_version", "has_errors", "updated_at")
    list_filter = ("kind", "project")
    list_select_related = ("project", "page")
    raw_id_fields = ("page",)
    show_full_result_count = False

    @admin.display(boolean=True, description="errors")
    def has_errors(self, obj) -> bool:
        return bool(obj.errors)


@admin.register(RuleSet)
class RuleSetAdmin(admin.ModelAdmin):
    """Rules are compiled when saved: an invalid selector, XPath or regex is refused with the reason."""

    list_display = ("name", "project", "enabled", "version", "updated_at")
    list_filter = ("project", "enabled")
    readonly_fields = ("version",)


class TryForm(forms.Form):
    url = forms.CharField(max_length=2000)
    project = forms.ModelChoiceField(Project.objects.all(), required=False, help_text="Its rules and settings.")
    allow_private = forms.BooleanField(required=False)


@staff_member_required
def try_url_view(request):
    """Fetch one URL with the real client and show its whole extraction; stores nothing."""
    form = TryForm(request.POST or None)
    report = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        report = trial_report(try_url(data["url"], project=data["project"], allow_private=data["allow_private"]))
    context = {
        **admin.site.each_context(request),
        "title": "Try a URL",
        "form": form,
        "report": report,
        "pretty": json.dumps(report, indent=2, ensure_ascii=False, default=str) if report else "",
    }
    return render(request, "admin/tryurl.html", context)
