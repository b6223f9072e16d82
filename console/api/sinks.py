"""Result sinks: CRUD per project (?project=<slug>), what each delivered and owes, and a retry of its
failed records."""

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from console.access.policy import NETWORK_SINK_KINDS, may, network_refusal
from console.health.sink_status import sink_error_masked
from sinks.delivery import sink_counts, sink_last_error, sink_retry
from sinks.models import Sink

from . import serializers as s
from .fields import SinkConfigField
from .filters import SinkFilter
from .permissions import ProjectScopedMixin, read_write


class SinkSerializer(s.KnownFieldsOnly, serializers.ModelSerializer):
    project = s.ProjectSlugField(help_text="Slug of the sink's project.")
    config = SinkConfigField(required=False, help_text=Sink._meta.get_field("config").help_text)
    counts = serializers.SerializerMethodField()
    last_error = serializers.SerializerMethodField(help_text="The newest error its records met, secrets masked.")
    failing_since = serializers.DateTimeField(
        read_only=True, help_text="When its deliveries began to fail; null while it delivers."
    )

    class Meta:
        model = Sink
        fields = (
            "id", "project", "name", "kind", "config", "items", "pages", "assets", "active", "counts", "last_error",
            "failing_since",
        )  # fmt: skip

    @extend_schema_field(serializers.DictField(child=serializers.IntegerField()))
    def get_counts(self, sink: Sink) -> dict:
        return sink_counts(sink)

    def get_last_error(self, sink: Sink) -> str:
        return sink_error_masked(sink, sink_last_error(sink))

    def validate(self, attrs: dict) -> dict:
        """The model's own checks (the admin and the commands run the same ones)."""
        editable = ("project", "name", "kind", "config", "items", "pages", "assets", "active")
        current = {f: getattr(self.instance, f) for f in editable} if self.instance is not None else {}
        candidate = Sink(**(current | attrs))
        try:
            candidate.clean()
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        duplicate = Sink.objects.filter(project=candidate.project, name=candidate.name)
        if duplicate.exclude(id=getattr(self.instance, "id", None)).exists():
            raise serializers.ValidationError({"name": "The project already has a sink of this name."})
        return attrs


@extend_schema_view(list=extend_schema(summary="List sinks (?project=<slug>, ?kind=)"))
class SinkViewSet(ProjectScopedMixin, viewsets.ModelViewSet):
    """Sinks of the user's projects. A redis or python sink reaches into networks or runs code: making
    or changing one needs the network settings permission."""

    queryset = Sink.objects.select_related("project").order_by("id")
    action_permissions = read_write("sink", app="sinks") | {"retry_failed": "console.run_project"}
    serializer_class = SinkSerializer
    filterset_class = SinkFilter
    lookup_value_regex = s.ID_PATTERN

    def perform_create(self, serializer: SinkSerializer) -> None:
        _refuse_network_sinks(self.request.user, None, serializer.validated_data)
        serializer.save()

    def perform_update(self, serializer: SinkSerializer) -> None:
        _refuse_network_sinks(self.request.user, serializer.instance, serializer.validated_data)
        serializer.save()

    @extend_schema(request=None, responses=SinkSerializer, summary="Retry the sink's failed records")
    @action(detail=True, methods=["post"], url_path="retry-failed")
    def retry_failed(self, request: Request, pk: str) -> Response:
        sink = self.get_object()
        sink_retry(sink)
        return Response(SinkSerializer(sink).data)


def _refuse_network_sinks(user, sink: Sink | None, data: dict) -> None:
    """A redis or python sink, new or with a changed kind or config, needs the network permission."""
    kind = data.get("kind", sink.kind if sink else "")
    config = data.get("config", sink.config if sink else {})
    unchanged = sink is not None and (sink.kind, sink.config) == (kind, config)
    if kind in NETWORK_SINK_KINDS and not unchanged and not may(user, "network"):
        raise PermissionDenied(network_refusal([f"a {kind} sink"]))
