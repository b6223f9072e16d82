"""Monitoring over the API: a project's health figures (GET /api/projects/<slug>/health/), its
monitors with their thresholds (changeable), and the alerts they raised."""

import django_filters
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import mixins, serializers, viewsets

from console.health_models import Alert, Monitor
from console.monitors import DEFAULTS, monitor_thresholds, thresholds_problem

from . import serializers as s
from .filters import ProjectFilter
from .permissions import ProjectScopedMixin


class MonitorSerializer(serializers.ModelSerializer):
    """A built-in monitor of a project. `thresholds` holds the overrides; `in_effect` the defaults
    with them."""

    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    in_effect = serializers.SerializerMethodField()
    defaults = serializers.SerializerMethodField()

    class Meta:
        model = Monitor
        fields = ["id", "project", "kind", "enabled", "thresholds", "in_effect", "defaults", "cooldown_minutes"]
        read_only_fields = ["id", "project", "kind", "in_effect", "defaults"]

    @extend_schema_field(serializers.DictField())
    def get_in_effect(self, monitor: Monitor) -> dict:
        return monitor_thresholds(monitor)

    @extend_schema_field(serializers.DictField())
    def get_defaults(self, monitor: Monitor) -> dict:
        return DEFAULTS[monitor.kind]

    def validate_thresholds(self, value):
        if problem := thresholds_problem(self.instance.kind, value):
            raise serializers.ValidationError(problem)
        return value


class AlertSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    monitor = serializers.CharField(source="monitor.kind", read_only=True)
    open = serializers.BooleanField(read_only=True)

    class Meta:
        model = Alert
        fields = ["id", "project", "monitor", "subject", "message", "evidence", "since", "resolved_at", "open",
                  "notified_at", "recovery_notified_at", "notify_error"]  # fmt: skip
        read_only_fields = fields


class MonitorFilter(django_filters.FilterSet):
    project = ProjectFilter()
    kind = django_filters.ChoiceFilter(choices=Monitor.Kind.choices)

    class Meta:
        model = Monitor
        fields = ["project", "kind"]


class AlertFilter(django_filters.FilterSet):
    project = ProjectFilter()
    open = django_filters.BooleanFilter(field_name="resolved_at", lookup_expr="isnull", help_text="Only open ones.")

    class Meta:
        model = Alert
        fields = ["project", "open"]


@extend_schema_view(
    list=extend_schema(summary="List monitors (?project=<slug>, ?kind=)"),
    partial_update=extend_schema(summary="Change a monitor's thresholds, cooldown or enabled"),
)
class MonitorViewSet(
    ProjectScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    queryset = Monitor.objects.select_related("project").order_by("project_id", "kind")
    serializer_class = MonitorSerializer
    filterset_class = MonitorFilter
    lookup_value_regex = s.ID_PATTERN
    action_permissions = {
        "list": "console.view_monitor",
        "retrieve": "console.view_monitor",
        "update": "console.change_monitor",
        "partial_update": "console.change_monitor",
    }


@extend_schema_view(list=extend_schema(summary="List alerts, newest first (?project=<slug>, ?open=true)"))
class AlertViewSet(ProjectScopedMixin, viewsets.ReadOnlyModelViewSet):
    queryset = Alert.objects.select_related("project", "monitor").order_by("-id")
    serializer_class = AlertSerializer
    filterset_class = AlertFilter
    lookup_value_regex = s.ID_PATTERN
    action_permissions = {"list": "console.view_alert", "retrieve": "console.view_alert"}
