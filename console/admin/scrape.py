"""Admin for items and rule sets, and the "Try a URL" debugger page (the try_url permission; private
addresses, or a project that allows them, also need change_network_settings)."""

import json

from django import forms
from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import render
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator
from django_ace import AceWidget

from console.access.policy import may, projects_for
from console.admin.access import PROJECT_FILTER, ProjectScopedAdmin
from console.admin.lists import CappedPaginator, recent_values_filter
from console.tryurl import fate_groups, trial_report, try_url
from crawl.hosts.credentials import secrets_refusal
from crawl.models import Project
from scrape.models import Item, RuleSet


@admin.register(Item)
class ItemAdmin(ProjectScopedAdmin):
    list_display = ("id", "project", "page_link", "kind", "position", "rule_version", "has_errors", "updated_at")
    list_filter = (recent_values_filter("kind", "kind"), PROJECT_FILTER)
    list_select_related = ("project", "page")
    raw_id_fields = ("project", "page")
    show_full_result_count = False
    paginator = CappedPaginator
    fields = ("project", "page_link", "kind", "position", "rule_version", "pretty_data", "pretty_errors", "updated_at")
    readonly_fields = fields

    def has_add_permission(self, request):
        return False  # items are what the extract stage made

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(boolean=True, description="errors")
    def has_errors(self, obj) -> bool:
        return bool(obj.errors)

    @admin.display(description="page", ordering="page_id")
    def page_link(self, obj):
        url = reverse("admin:crawl_page_change", args=[obj.page_id])
        return format_html('<a href="{}">{}</a>', url, Truncator(obj.page.url).chars(100))

    @admin.display(description="data")
    def pretty_data(self, obj):
        return _pretty(obj.data)

    @admin.display(description="errors")
    def pretty_errors(self, obj):
        return _pretty(obj.errors) if obj.errors else "none"


def _pretty(value) -> str:
    return format_html(
        "<pre>{}</pre>", cut_short(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str))
    )


MAX_SHOWN_CHARS = 200_000  # of one JSON value shown whole (an item's data, the Try a URL report)


def cut_short(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """A value as a console page shows it: a hostile page's megabytes would stall the browser."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n... {len(text) - limit} more characters (the whole value is in the API and exports)"


class RuleSetForm(forms.ModelForm):
    class Meta:
        model = RuleSet
        fields = ("project", "name", "enabled", "spec")
        widgets = {  # the rules' JSON in the console's editor: highlighting and line numbers
            "spec": AceWidget(
                mode="json", width="100%", height="420px", useworker=False, showprintmargin=False, toolbar=False
            )
        }


@admin.register(RuleSet)
class RuleSetAdmin(ProjectScopedAdmin):
    """Rules are compiled when saved: an invalid selector, XPath or regex is refused with the reason."""

    form = RuleSetForm

    list_display = ("name", "project", "enabled", "version", "updated_at")
    list_filter = (PROJECT_FILTER, "enabled")
    readonly_fields = ("version",)

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        return spec_field_explained(super().formfield_for_dbfield(db_field, request, **kwargs), db_field)


WATCHED_FIELDS_HELP = (
    " The health monitors watch a rule set's required fields when it has any (a vanished optional field, "
    'say price, raises nothing), and every field when none is required: list in "required" the fields '
    "whose loss should alert."
)


def spec_field_explained(formfield, db_field):
    """The rule set's spec field, whose help says which fields the monitors watch."""
    if db_field.name == "spec" and formfield is not None:
        formfield.help_text = f"{db_field.help_text}{WATCHED_FIELDS_HELP}"
    return formfield


SELECTOR_KINDS = [("css", "CSS"), ("xpath", "XPath")]
MAX_VALUE_CHARS = 1000  # of one field's value in an item table
MAX_ITEM_FIELDS = 200  # fields of one item shown in a table
MAX_SHOWN_ITEMS = 50  # item tables on the Try a URL page (all are counted)


class TryForm(forms.Form):
    url = forms.CharField(max_length=2000)
    project = forms.ModelChoiceField(Project.objects.none(), required=False, help_text="Its rules and settings.")
    allow_private = forms.BooleanField(required=False)
    selector = forms.CharField(
        max_length=1000, required=False, help_text="Optional: a selector to try on the fetched page before saving it."
    )
    selector_type = forms.TypedChoiceField(choices=SELECTOR_KINDS, required=False, empty_value="css")

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user, self.refused = user, False
        self.fields["project"].queryset = projects_for(user)
        if not may(user, "network"):
            self.fields["allow_private"].help_text = "Needs the permission to change network settings."

    def clean(self):
        """Private addresses reach into internal networks: asking for them, directly or through a
        project that allows them, needs the network settings permission; so does trying a URL off
        the sites of a project that holds secrets (its proxy would carry the request)."""
        cleaned = super().clean()
        project = cleaned.get("project")
        private = cleaned.get("allow_private") or bool(project and project.allow_private)
        if private and not may(self.user, "network"):
            self.refused = True
            raise forms.ValidationError(
                "Private addresses (allow_private, or a project that allows them) need the "
                "console.change_network_settings permission."
            )
        refusal = project and not may(self.user, "network") and secrets_refusal(project, cleaned.get("url", ""))
        if refusal:
            self.refused = True
            raise forms.ValidationError(refusal)
        return cleaned


@staff_member_required
def try_url_view(request):
    """Fetch one URL as the crawl would and show its whole extraction and each link's fate; stores nothing."""
    if not may(request.user, "try"):
        raise PermissionDenied
    initial = {"url": request.GET.get("url", ""), "project": request.GET.get("project", "")}
    form = TryForm(request.POST or None, user=request.user, initial=initial)
    context = {**admin.site.each_context(request), "title": "Try a URL", "form": form}
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        trial = try_url(data["url"], project=data["project"], allow_private=data["allow_private"])
        context |= _report_context(trial_report(trial, selector=data["selector"], selector_kind=data["selector_type"]))
    return render(request, "admin/tryurl.html", context, status=403 if form.refused else 200)


def _report_context(report: dict) -> dict:
    """The report as the template reads it: lists, not dicts (a template's `x.items` on a dict without
    that key is the dict's items() method), and items as tables."""
    return {
        "report": report,
        "headers": sorted(report["headers"].items()),
        "fetched": "page" in report,
        "fields": item_rows(report["fields"]) if "fields" in report else [],
        "items": [item_table(**item) for item in report.get("items", [])[:MAX_SHOWN_ITEMS]],
        "items_count": len(report.get("items", [])),
        "dropped": sorted(report.get("dropped", {}).items()),
        "link_groups": fate_groups(report.get("link_fates", [])),
        "pretty": cut_short(json.dumps(report, indent=2, ensure_ascii=False, default=str)),
    }


def item_table(*, kind: str, position: int, data, errors=(), url: str = "") -> dict:
    """One item as templates/admin/crawl/item_table.html shows it (`url`: its admin page, if any)."""
    return {"kind": kind, "position": position, "rows": item_rows(data), "errors": list(errors or []), "url": url}


def item_rows(data) -> list[tuple[str, str, bool]]:
    """(field name, value, is JSON) rows: strings as they are, anything else as compact JSON, both cut short."""
    pairs = list(data.items()) if isinstance(data, dict) else [("value", data)]
    rows = []
    if len(pairs) > MAX_ITEM_FIELDS:
        rows.append(("(fields)", f"the first {MAX_ITEM_FIELDS} of {len(pairs)} are shown", False))
    for name, value in pairs[:MAX_ITEM_FIELDS]:
        is_json = not isinstance(value, str)
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str) if is_json else value
        rows.append((str(name), Truncator(text).chars(MAX_VALUE_CHARS), is_json))
    return rows
