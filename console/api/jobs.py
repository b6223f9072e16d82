"""Jobs: the run history (list with ?project=<slug>&state=, detail with failures and log), and the
job actions (cancel, pause, resume, retry-failed), of the projects the user may see."""

from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from console.models import Job
from console.runs import jobs, steering

from . import serializers as s
from .filters import JobFilter
from .permissions import ProjectScopedMixin, read_only


class JobSerializer(serializers.ModelSerializer):
    """A run of a project. `counts` are read from its rows while it runs, and kept when it ends."""

    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    started_by = serializers.StringRelatedField()
    counts = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = ["id", "project", "kind", "state", "trigger", "started_by", "retry_of", "created_at",
                  "started_at", "finished_at", "message", "counts"]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(serializers.DictField())
    def get_counts(self, job: Job) -> dict:
        return jobs.job_counts(job)

    def to_representation(self, job: Job) -> dict:
        """State and start as the job's rows tell them, not only as the last jobs tick wrote them."""
        data = super().to_representation(job)
        state, started_at = jobs.job_observed(job)
        return data | {"state": state, "started_at": self.fields["started_at"].to_representation(started_at)}


class JobDetailSerializer(JobSerializer):
    failures = serializers.SerializerMethodField()
    log = serializers.SerializerMethodField()

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "failures", "log"]
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_failures(self, job: Job) -> list[dict]:
        return jobs.job_failures(job)

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_log(self, job: Job) -> list[dict]:
        fields = ("at", "level", "worker", "url", "code", "message")
        return list(job.log.order_by("-id").values(*fields)[:200])


@extend_schema_view(
    list=extend_schema(summary="List jobs, newest first (?project=<slug>, ?state=, ?kind=)"),
    retrieve=extend_schema(summary="A job with its counts, failing URLs and log"),
)
class JobViewSet(ProjectScopedMixin, viewsets.ReadOnlyModelViewSet):
    queryset = Job.objects.select_related("project", "started_by").order_by("-id")
    action_permissions = read_only("job", app="console") | dict.fromkeys(
        ("cancel", "pause", "resume", "retry_failed"), "console.run_project"
    )
    filterset_class = JobFilter
    lookup_value_regex = s.ID_PATTERN

    def get_serializer_class(self):
        return JobDetailSerializer if self.action == "retrieve" else JobSerializer

    def _done(self, job: Job, changed: bool, what: str) -> Response:
        job.refresh_from_db()
        if not changed:
            body = {"detail": f"job {job.id} is {job.state}: it cannot be {what}", "state": job.state}
            return Response(body, status=status.HTTP_409_CONFLICT)
        return Response(JobSerializer(job).data)

    @extend_schema(request=None, responses=JobSerializer, summary="Cancel a job (its owed work stays resumable)")
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        job = self.get_object()
        return self._done(job, steering.job_cancel(job=job, user=request.user), "cancelled")

    @extend_schema(request=None, responses=JobSerializer, summary="Pause a running job")
    @action(detail=True, methods=["post"])
    def pause(self, request: Request, pk: str) -> Response:
        job = self.get_object()
        return self._done(job, steering.job_pause(job=job), "paused")

    @extend_schema(request=None, responses=JobSerializer, summary="Resume a paused job")
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str) -> Response:
        job = self.get_object()
        return self._done(job, steering.job_resume(job=job), "resumed")

    @extend_schema(request=None, responses=JobSerializer, summary="Retry the job's failures as a new job")
    @action(detail=True, methods=["post"], url_path="retry-failed")
    def retry_failed(self, request: Request, pk: str) -> Response:
        job = self.get_object()
        new, _queued = jobs.job_retry_failed(job=job, trigger=Job.Trigger.API, user=request.user)
        return Response(JobSerializer(new).data, status=status.HTTP_201_CREATED)
