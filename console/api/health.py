"""Monitoring over the API: a project's health figures (GET /api/projects/<slug>/health/), its
monitors with their thresholds (changeable), and the alerts they raised."""

import django_filters
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.exceptions import ValidationError

from console.health.models import Alert, Monitor
from console.health.monitors import monitor_thresholds
from console.health.validators import DEFAULTS, RULES, monitor_problems

from . import serializers as s
from .filters import ProjectFilter
from .permissions import ProjectScopedMixin


class MonitorSerializer(s.KnownFieldsOnly, serializers.ModelSerializer):
    """A monitor of a project. Built in: `thresholds` holds the overrides, `in_effect` the defaults
    with them. A rule of your own (POSTed, DELETEd): its kind, name, what it watches, its threshold
    and its window in minutes."""

    project = s.ProjectSlugField(help_text="Slug of its project.")
    in_effect = serializers.SerializerMethodField()
    defaults = serializers.SerializerMethodField()

    class Meta:
        model = Monitor
        fields = ["id", "project", "kind", "name", "enabled", "urgent", "thresholds", "watch", "threshold",
                  "window_minutes", "in_effect", "defaults", "cooldown_minutes"]  # fmt: skip
        read_only_fields = ["id", "in_effect", "defaults"]

    @extend_schema_field(serializers.DictField())
    def get_in_effect(self, monitor: Monitor) -> dict:
        return monitor_thresholds(monitor)

    @extend_schema_field(serializers.DictField())
    def get_defaults(self, monitor: Monitor) -> dict:
        return DEFAULTS.get(monitor.kind, {})

    def validate(self, attrs: dict) -> dict:
        if self.instance is not None:
            moved = {f for f in ("project", "kind") if f in attrs and attrs[f] != getattr(self.instance, f)}
            if moved:
                raise serializers.ValidationError({f: "cannot be changed; make a new rule" for f in moved})
        elif attrs.get("kind") not in RULES:
            raise serializers.ValidationError(
                {"kind": f"a rule of your own is one of {', '.join(RULES)} (the built-in ones exist already)"}
            )
        editable = [f for f in self.Meta.fields if f not in self.Meta.read_only_fields]
        current = {f: getattr(self.instance, f) for f in editable} if self.instance is not None else {}
        if problems := monitor_problems(Monitor(**(current | attrs))):
            raise serializers.ValidationError(problems)
        return attrs


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
    create=extend_schema(summary="Make a rule of your own (kind, name, watch, threshold, window_minutes)"),
    partial_update=extend_schema(summary="Change a monitor's thresholds, cooldown or enabled"),
    destroy=extend_schema(summary="Delete a rule of your own (the built-in monitors stay: disable one)"),
)
class MonitorViewSet(ProjectScopedMixin, viewsets.ModelViewSet):
    queryset = Monitor.objects.select_related("project").order_by("project_id", "kind")
    serializer_class = MonitorSerializer
    filterset_class = MonitorFilter
    lookup_value_regex = s.ID_PATTERN
    action_permissions = {
        "list": "console.view_monitor",
        "retrieve": "console.view_monitor",
        "update": "console.change_monitor",
        "partial_update": "console.change_monitor",
        "create": "console.add_monitor",
        "destroy": "console.delete_monitor",
    }

    def perform_destroy(self, instance: Monitor) -> None:
        if instance.built_in:
            raise ValidationError({"kind": "a built-in monitor cannot be deleted: set enabled to false"})
        instance.delete()


@extend_schema_view(list=extend_schema(summary="List alerts, newest first (?project=<slug>, ?open=true)"))
class AlertViewSet(ProjectScopedMixin, viewsets.ReadOnlyModelViewSet):
    queryset = Alert.objects.select_related("project", "monitor").order_by("-id")
    serializer_class = AlertSerializer
    filterset_class = AlertFilter
    lookup_value_regex = s.ID_PATTERN
    action_permissions = {"list": "console.view_alert", "retrieve": "console.view_alert"}
