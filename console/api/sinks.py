"""Result sinks: CRUD per project (?project=<slug>), what each delivered and owes, and a retry of its
failed records."""

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from scrape.sinks.delivery import sink_counts, sink_retry
from scrape.sinks.models import Sink

from . import serializers as s
from .filters import SinkFilter


class SinkSerializer(serializers.ModelSerializer):
    project = s.ProjectSlugField(help_text="Slug of the sink's project.")
    counts = serializers.SerializerMethodField()

    class Meta:
        model = Sink
        fields = ("id", "project", "name", "kind", "config", "items", "pages", "assets", "active", "counts")

    @extend_schema_field(serializers.DictField(child=serializers.IntegerField()))
    def get_counts(self, sink: Sink) -> dict:
        return sink_counts(sink)

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
class SinkViewSet(viewsets.ModelViewSet):
    queryset = Sink.objects.select_related("project").order_by("id")
    serializer_class = SinkSerializer
    filterset_class = SinkFilter
    lookup_value_regex = s.ID_PATTERN

    @extend_schema(request=None, responses=SinkSerializer, summary="Retry the sink's failed records")
    @action(detail=True, methods=["post"], url_path="retry-failed")
    def retry_failed(self, request: Request, pk: str) -> Response:
        sink = self.get_object()
        sink_retry(sink)
        return Response(SinkSerializer(sink).data)
