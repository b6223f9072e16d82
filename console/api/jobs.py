"""Jobs: the run history (list with ?project=<slug>&state=, detail with failures and log), and the
job actions (cancel, pause, resume, retry-failed)."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from console import jobs
from console.models import Job

from . import serializers as s
from .filters import JobFilter


@extend_schema_view(
    list=extend_schema(summary="List jobs, newest first (?project=<slug>, ?state=, ?kind=)"),
    retrieve=extend_schema(summary="A job with its counts, failing URLs and log"),
)
class JobViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = Job.objects.select_related("project", "started_by").order_by("-id")
    filterset_class = JobFilter
    lookup_value_regex = s.ID_PATTERN

    def get_serializer_class(self):
        return s.JobDetailSerializer if self.action == "retrieve" else s.JobSerializer

    def _done(self, job: Job, changed: bool, what: str) -> Response:
        job.refresh_from_db()
        if not changed:
            body = {"detail": f"job {job.id} is {job.state}: it cannot be {what}", "state": job.state}
            return Response(body, status=status.HTTP_409_CONFLICT)
        return Response(s.JobSerializer(job).data)

    @extend_schema(request=None, responses=s.JobSerializer, summary="Cancel a job (its owed work stays resumable)")
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        job = self.get_object()
        return self._done(job, jobs.job_cancel(job=job, user=request.user), "cancelled")

    @extend_schema(request=None, responses=s.JobSerializer, summary="Pause a running job")
    @action(detail=True, methods=["post"])
    def pause(self, request: Request, pk: str) -> Response:
        job = self.get_object()
        return self._done(job, jobs.job_pause(job=job), "paused")

    @extend_schema(request=None, responses=s.JobSerializer, summary="Resume a paused job")
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str) -> Response:
        job = self.get_object()
        return self._done(job, jobs.job_resume(job=job), "resumed")

    @extend_schema(request=None, responses=s.JobSerializer, summary="Retry the job's failures as a new job")
    @action(detail=True, methods=["post"], url_path="retry-failed")
    def retry_failed(self, request: Request, pk: str) -> Response:
        job = self.get_object()
        new, _queued = jobs.job_retry_failed(job=job, trigger=Job.Trigger.API, user=request.user)
        return Response(s.JobSerializer(new).data, status=status.HTTP_201_CREATED)
