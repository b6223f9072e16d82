"""The admin's other controls in the API, with the admin's permissions: rule sets (CRUD, compiled
when saved), hosts (block, unblock, delay; only for users who see every project, as a host is
shared by all of them) and Try a URL (console.try_url; private addresses need network settings)."""

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.access.policy import may, sees_all
from console.runs.control import host_block, host_unblock
from console.tryurl import trial_report, try_url
from crawl.hosts.credentials import secrets_refusal
from crawl.models import Host
from scrape.models import RuleSet
from scrape.rules import RuleError

from . import serializers as s
from .fields import JSONObjectField
from .filters import HostFilter, RuleSetFilter
from .permissions import ProjectScopedMixin, read_write


class RuleSetSerializer(s.KnownFieldsOnly, serializers.ModelSerializer):
    project = s.ProjectSlugField(help_text="Slug of the rule set's project.")
    spec = JSONObjectField(help_text=RuleSet._meta.get_field("spec").help_text + " See docs/spiders-and-rules.md.")

    class Meta:
        model = RuleSet
        fields = ("id", "project", "name", "enabled", "spec", "version", "updated_at")
        read_only_fields = ("version", "updated_at")
        validators = []  # the pair (project, name) is checked in validate(), with a message that names it

    def validate(self, attrs: dict) -> dict:
        """The model's own checks, as the admin's form runs them: rules that do not compile, or whose
        items' kind another rule set of the project makes, are refused with the reason."""
        editable = ("project", "name", "enabled", "spec")
        current = {f: getattr(self.instance, f) for f in editable} if self.instance is not None else {}
        candidate = RuleSet(**(current | attrs))
        candidate.pk = getattr(self.instance, "pk", None)
        try:
            candidate.clean()
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        duplicate = RuleSet.objects.filter(project=candidate.project, name=candidate.name)
        if duplicate.exclude(pk=candidate.pk).exists():
            raise serializers.ValidationError({"name": "The project already has a rule set of this name."})
        return attrs

    def save(self, **kwargs):
        try:
            return super().save(**kwargs)
        except RuleError as exc:  # changed between validation and save (another request)
            raise serializers.ValidationError({"spec": str(exc)}) from None


@extend_schema_view(list=extend_schema(summary="List rule sets (?project=<slug>)"))
class RuleSetViewSet(ProjectScopedMixin, viewsets.ModelViewSet):
    """Extraction rule sets of the user's projects. A change is seen by the next extract batch; the
    project's Re-extract applies it to the pages already stored."""

    queryset = RuleSet.objects.select_related("project").order_by("id")
    action_permissions = read_write("ruleset", app="scrape")
    serializer_class = RuleSetSerializer
    filterset_class = RuleSetFilter
    lookup_value_regex = s.ID_PATTERN


class SeesAllProjects(BasePermission):
    """Hosts are shared by every project: only a user who sees them all may read or steer them."""

    message = "Hosts are shared by every project: this needs console.view_all_projects."

    def has_permission(self, request, view) -> bool:
        return sees_all(request.user)


class HostSerializer(s.KnownFieldsOnly, serializers.ModelSerializer):
    class Meta:
        model = Host
        fields = (
            *("id", "host", "blocked", "blocked_reason", "min_delay", "max_in_flight", "crawl_delay"),
            *("next_allowed_at", "backoff_until", "throttle_delay", "failures", "last_status", "updated_at"),
        )
        read_only_fields = tuple(f for f in fields if f not in ("host", "min_delay", "max_in_flight"))
        extra_kwargs = {"min_delay": {"min_value": 0, "max_value": 86400}, "max_in_flight": {"min_value": 1}}

    def validate_host(self, value: str) -> str:
        """A host name as the crawl keeps it (lower case, with a port when not the default)."""
        host = value.strip().lower()
        if not host or any(ch in host for ch in "/ @?#"):
            raise serializers.ValidationError("A host name, like example.com or 127.0.0.1:8001 (no scheme or path).")
        if self.instance is not None and host != self.instance.host:
            raise serializers.ValidationError("A host's name cannot be changed.")
        return host


class HostActionSerializer(serializers.Serializer):
    reason = serializers.CharField(
        required=False, allow_blank=True, max_length=200, help_text="Why (kept on the host)."
    )


class HostUnblockedSerializer(HostSerializer):
    published = serializers.IntegerField(read_only=True, help_text="Pages queued again or published.")

    class Meta(HostSerializer.Meta):
        fields = (*HostSerializer.Meta.fields, "published")


@extend_schema_view(
    list=extend_schema(summary="List hosts (?blocked=true), with their politeness state"),
    partial_update=extend_schema(summary="Set a host's delay (min_delay) or its cap (max_in_flight)"),
)
class HostViewSet(ProjectScopedMixin, viewsets.ModelViewSet):
    """Politeness per host, shared by all projects and workers; found by name (/api/hosts/example.com/)."""

    queryset = Host.objects.order_by("host")
    action_permissions = read_write("host") | {"block": "crawl.change_host", "unblock": "crawl.change_host"}
    serializer_class = HostSerializer
    filterset_class = HostFilter
    lookup_field = "host"
    lookup_value_regex = r"[^/]{1,262}"

    def get_permissions(self):
        return [*super().get_permissions(), SeesAllProjects()]

    def get_queryset(self):
        return self.queryset.all()  # not a project's rows: SeesAllProjects guards them

    @extend_schema(request=HostActionSerializer, responses=HostSerializer, summary="Block a host (every project)")
    @action(detail=True, methods=["post"])
    def block(self, request: Request, host: str) -> Response:
        """Its pages fail as host_blocked instead of being fetched, in every project, until unblocked."""
        row = self.get_object()
        body = HostActionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        host_block(host=row.host, reason=body.validated_data.get("reason") or f"blocked by {request.user} in the API")
        row.refresh_from_db()
        return Response(HostSerializer(row).data)

    @extend_schema(request=None, responses=HostUnblockedSerializer, summary="Unblock a host")
    @action(detail=True, methods=["post"])
    def unblock(self, request: Request, host: str) -> Response:
        """Allow it again: its host_blocked failures get fresh attempts and its queued pages are published."""
        row = self.get_object()
        published = host_unblock(host=row.host)
        row.refresh_from_db()
        return Response(HostSerializer(row).data | {"published": published})


class TrySerializer(s.KnownFieldsOnly, serializers.Serializer):
    url = serializers.CharField(max_length=2000, help_text="The URL to fetch as the crawl would.")
    project = s.ProjectSlugField(required=False, allow_null=True, help_text="Its rules and settings (a slug).")
    allow_private = serializers.BooleanField(
        default=False, help_text="Allow private addresses (needs console.change_network_settings)."
    )
    selector = serializers.CharField(
        required=False, allow_blank=True, max_length=1000, help_text="A selector to try on the fetched page."
    )
    selector_type = serializers.ChoiceField(choices=["css", "xpath"], default="css")


class TryURLView(APIView):
    """Try a URL: fetch one URL as the crawl would and answer its whole extraction and each link's
    fate; stores nothing. The admin's Try a URL page, as JSON."""

    def check_permissions(self, request):
        super().check_permissions(request)
        if not may(request.user, "try"):
            self.permission_denied(request, message="This needs the console.try_url permission.")

    @extend_schema(request=TrySerializer, responses=OpenApiTypes.OBJECT, summary="Try a URL (nothing is stored)")
    def post(self, request: Request) -> Response:
        body = TrySerializer(data=request.data, context={"request": request})
        body.is_valid(raise_exception=True)
        data = body.validated_data
        project = data.get("project")
        _refuse_private(request.user, project, data)
        trial = try_url(data["url"], project=project, allow_private=data["allow_private"])
        selector, kind = data.get("selector", ""), data["selector_type"]
        return Response(trial_report(trial, selector=selector, selector_kind=kind))


def _refuse_private(user, project, data: dict) -> None:
    """As the admin's form: private addresses (asked for, or allowed by the project), or a URL off the
    sites of a project that holds secrets, need the network settings permission."""
    if may(user, "network"):
        return
    if data["allow_private"] or (project is not None and project.allow_private):
        raise PermissionDenied(
            "Private addresses (allow_private, or a project that allows them) need the "
            "console.change_network_settings permission."
        )
    if project is not None and (refusal := secrets_refusal(project, data["url"])):
        raise PermissionDenied(refusal)
