"""Query filters of the list endpoints. Every value is validated first: a bad one is a 400, never a 500."""

import re

import django_filters
from django import forms
from django.core.exceptions import ValidationError

from console.access.policy import projects_for
from console.models import Job
from crawl.models import Host, MediaAsset, Page, Project, Seed
from scrape.models import Item, RuleSet
from sinks.models import Sink

from .serializers import MAX_ID, SLUG_PATTERN

SMALL_INT = 32767
INT = 2147483647


class SlugChoiceField(forms.ModelChoiceField):
    """A project slug; a value that cannot be a slug is refused without a query."""

    def to_python(self, value):
        if value not in self.empty_values and not re.fullmatch(SLUG_PATTERN, str(value)):
            raise ValidationError(self.error_messages["invalid_choice"], code="invalid_choice")
        return super().to_python(value)


class ProjectFilter(django_filters.ModelChoiceFilter):
    field_class = SlugChoiceField

    def __init__(self, **kwargs):
        kwargs.setdefault("help_text", "Slug of the project.")
        super().__init__(to_field_name="slug", queryset=_visible_projects, **kwargs)


def _visible_projects(request):
    """Only the projects the user may see: another team's slug is as unknown as a made-up one."""
    return projects_for(request.user) if request is not None else Project.objects.none()


class IntegerFilter(django_filters.NumberFilter):
    field_class = forms.IntegerField


class ProjectListFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Project.Status.choices)

    class Meta:
        model = Project
        fields = ["status"]


class JobFilter(django_filters.FilterSet):
    project = ProjectFilter()
    state = django_filters.ChoiceFilter(choices=Job.State.choices)
    kind = django_filters.ChoiceFilter(choices=Job.Kind.choices)

    class Meta:
        model = Job
        fields = ["project", "state", "kind"]


class SinkFilter(django_filters.FilterSet):
    project = ProjectFilter()
    kind = django_filters.ChoiceFilter(choices=Sink.Kind.choices)

    class Meta:
        model = Sink
        fields = ["project", "kind"]


class SeedFilter(django_filters.FilterSet):
    project = ProjectFilter()
    kind = django_filters.ChoiceFilter(choices=Seed.Kind.choices)
    active = django_filters.BooleanFilter()

    class Meta:
        model = Seed
        fields = ["project", "kind", "active"]


class PageFilter(django_filters.FilterSet):
    project = ProjectFilter()
    state = django_filters.ChoiceFilter(choices=Page.State.choices)
    status_code = IntegerFilter(min_value=0, max_value=SMALL_INT)
    host = django_filters.CharFilter(max_length=255)
    depth = IntegerFilter(min_value=0, max_value=INT)
    error_code = django_filters.CharFilter(max_length=40)
    content_type = django_filters.CharFilter(
        lookup_expr="istartswith", max_length=200, help_text="Content type prefix, e.g. text/html."
    )
    is_seed = django_filters.BooleanFilter()

    class Meta:
        model = Page
        fields = ["project", "state", "status_code", "host", "depth", "error_code", "content_type", "is_seed"]


class FailureFilter(django_filters.FilterSet):
    project = ProjectFilter()
    error_code = django_filters.CharFilter(max_length=40)
    host = django_filters.CharFilter(max_length=255)

    class Meta:
        model = Page
        fields = ["project", "error_code", "host"]


class ItemFilter(django_filters.FilterSet):
    project = ProjectFilter()
    page = IntegerFilter(field_name="page_id", min_value=1, max_value=MAX_ID, help_text="Id of the page.")
    kind = django_filters.CharFilter(max_length=80, help_text="page, rule:<name>, api or spider.")

    class Meta:
        model = Item
        fields = ["project", "page", "kind"]


class AssetFilter(django_filters.FilterSet):
    project = ProjectFilter()
    state = django_filters.ChoiceFilter(choices=MediaAsset.State.choices)
    kind = django_filters.ChoiceFilter(choices=MediaAsset.Kind.choices)

    class Meta:
        model = MediaAsset
        fields = ["project", "state", "kind"]


class RuleSetFilter(django_filters.FilterSet):
    project = ProjectFilter()
    enabled = django_filters.BooleanFilter()

    class Meta:
        model = RuleSet
        fields = ["project", "enabled"]


class HostFilter(django_filters.FilterSet):
    blocked = django_filters.BooleanFilter()

    class Meta:
        model = Host
        fields = ["blocked"]
