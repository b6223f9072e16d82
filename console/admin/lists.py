"""Changelist helpers for tables of millions of rows: a paginator whose count is bounded, and list
filters that offer the most common values of recent rows instead of a DISTINCT over the table."""

from collections import Counter

from django.contrib import admin
from django.core.paginator import Paginator
from django.utils.functional import cached_property

COUNT_CAP = 10_000
SAMPLE_ROWS = 5_000
TOP_VALUES = 20


class CappedPaginator(Paginator):
    """Counts at most COUNT_CAP + 1 rows (`SELECT COUNT(*) FROM (... LIMIT n)`), so a changelist of
    a huge table never scans it whole; past the cap it pages through the first COUNT_CAP rows."""

    @cached_property
    def count(self) -> int:
        counted = self.object_list[: COUNT_CAP + 1].count()
        self.capped = counted > COUNT_CAP
        return min(counted, COUNT_CAP)

    capped = False


class RecentValuesFilter(admin.SimpleListFilter):
    """The TOP_VALUES most common values of `parameter_name` among the SAMPLE_ROWS newest rows
    (newest by primary key: an index walk), within the project filter when one is chosen. The
    value in use is always offered, so a rare one stays visible once picked."""

    only: dict = {}  # extra filter of the sample, e.g. {"state": "failed"}

    def lookups(self, request, model_admin):
        rows = model_admin.get_queryset(request).filter(**self.only)
        project = request.GET.get("project__id__exact")
        if project and project.isascii() and project.isdigit():
            rows = rows.filter(project_id=int(project))
        sample = rows.order_by("-pk").values_list(self.parameter_name, flat=True)[:SAMPLE_ROWS]
        common = [v for v, _ in Counter(sample).most_common(TOP_VALUES)]
        if self.value() and self.value() not in {str(v) for v in common}:
            common.append(self.value())
        return [(str(v), _label(v)) for v in sorted(common, key=str)]

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        field = queryset.model._meta.get_field(self.parameter_name)
        return queryset.filter(**{self.parameter_name: field.to_python(value) if value != "None" else None})


def recent_values_filter(field: str, title: str, **only) -> type[RecentValuesFilter]:
    """A RecentValuesFilter on one field, e.g. recent_values_filter("host", "host")."""
    attrs = {"parameter_name": field, "title": title, "only": only}
    return type(f"Recent_{field}_Filter", (RecentValuesFilter,), attrs)


def _label(value) -> str:
    if value is None:
        return "(none)"
    return str(value) if value != "" else "(empty)"
