"""Projects and seeds: CRUD, the crawl controls (start, pause, resume, recrawl, retry) and the export."""

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse

from console.access.policy import may, network_changes, network_refusal, project_owner_add
from console.exports.rows import CONTENT_TYPES, export_response
from console.exports.warc import warc_response
from console.health.counters import health_figures, project_health
from console.models import Job
from console.runs import jobs, steering
from console.runs.workers import jobs_open, pipeline_warnings
from console.selectors import project_errors, project_progress, stage_backlog
from crawl.hosts.credentials import secrets_refusal
from crawl.models import Project, Seed
from crawl.services.projects import project_create

from . import serializers as s
from .filters import ProjectListFilter, SeedFilter
from .permissions import ProjectScopedMixin, read_write

RUN, EXPORT = "console.run_project", "console.export_results"


class _FirstRenderer(BaseContentNegotiation):
    """The export's ?format= names a file format, not a DRF renderer; errors are answered in JSON."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


@extend_schema_view(
    list=extend_schema(summary="List projects"),
    create=extend_schema(summary="Create a project (the slug defaults to one made from the name)"),
    destroy=extend_schema(summary="Delete a project with its frontier, items and asset rows"),
)
class ProjectViewSet(ProjectScopedMixin, viewsets.ModelViewSet):
    """Only the projects the user may see; the creator of a project is one of its owners."""

    queryset = Project.objects.all()
    serializer_class = s.ProjectSerializer
    filterset_class = ProjectListFilter
    lookup_field = "slug"
    lookup_value_regex = s.SLUG_PATTERN
    project_path = "pk"
    action_permissions = read_write("project") | {
        "progress": "crawl.view_project",
        "health": "crawl.view_project",
        **dict.fromkeys(("start", "pause", "resume", "recrawl", "retry_failed", "reextract"), RUN),
        "export": EXPORT,
    }

    @transaction.atomic
    def perform_create(self, serializer: s.ProjectSerializer) -> None:
        _refuse_network_changes(self.request.user, network_changes(None, serializer.validated_data))
        serializer.instance = project_create(**serializer.validated_data)
        project_owner_add(project=serializer.instance, user=self.request.user)

    def perform_update(self, serializer: s.ProjectSerializer) -> None:
        _refuse_network_changes(self.request.user, network_changes(serializer.instance, serializer.validated_data))
        serializer.save()  # the save moves the project's change stamp: workers see it at their next batch

    def _result(self, project: Project, **counts) -> Response:
        project.refresh_from_db(fields=["status", "job_id"])
        return Response({"project": project.slug, "status": project.status, "job": project.job_id, **counts})

    @extend_schema(request=None, responses=s.PublishedResultSerializer, summary="Start the crawl (a job)")
    @action(detail=True, methods=["post"])
    def start(self, request: Request, slug: str) -> Response:
        """Begin a job (or join the running one): the project becomes active, its active seeds go in the
        frontier and everything queued is published. The answer names the job (/api/jobs/<id>/)."""
        project = self.get_object()
        try:
            _job, published = steering.crawl_start(project=project, trigger=Job.Trigger.API, user=request.user)
        except steering.ProjectFinished as finished:
            recrawl = reverse("project-recrawl", args=[project.slug])
            offer = {"recrawl_due": {"POST": recrawl, "body": {"due": True}}, "recrawl": {"POST": recrawl}}
            return Response({"detail": str(finished), "offer": offer}, status=409)
        return self._result(project, published=published)

    @extend_schema(request=None, responses=s.PauseResultSerializer, summary="Pause the crawl")
    @action(detail=True, methods=["post"])
    def pause(self, request: Request, slug: str) -> Response:
        """Stop handing out the project's work (its job pauses); claimed batches finish, queued rows stay."""
        project = self.get_object()
        return self._result(project, changed=steering.project_pause(project=project))

    @extend_schema(request=None, responses=s.PublishedResultSerializer, summary="Resume a paused crawl")
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, slug: str) -> Response:
        """Make the project (and its paused job) active again and republish its queued work."""
        project = self.get_object()
        steering.project_resume(project=project, trigger=Job.Trigger.API, user=request.user)
        return self._result(project, published=project_progress(project)["pending"])

    @extend_schema(
        request=s.RecrawlSerializer, responses=s.QueuedResultSerializer, summary="Recrawl finished pages (a job)"
    )
    @action(detail=True, methods=["post"])
    def recrawl(self, request: Request, slug: str) -> Response:
        """Queue the finished pages again (conditional GET makes unchanged ones cheap), as a job; with
        {"due": true} only those whose revisit is due."""
        project = self.get_object()
        body = s.RecrawlSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        recrawl = jobs.crawl_recrawl_due if body.validated_data["due"] else jobs.crawl_recrawl
        _job, queued = recrawl(project=project, trigger=Job.Trigger.API, user=request.user)
        return self._result(project, queued=queued)

    @extend_schema(request=s.RetryFailedSerializer, responses=s.RequeuedResultSerializer, summary="Retry failed pages")
    @action(detail=True, methods=["post"], url_path="retry-failed")
    def retry_failed(self, request: Request, slug: str) -> Response:
        """Give the project's failed pages (optionally of one error code) fresh attempts and queue them."""
        project = self.get_object()
        body = s.RetryFailedSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        error_code = body.validated_data.get("error_code") or None
        job, requeued = jobs.crawl_retry_failed(
            project=project, trigger=Job.Trigger.API, user=request.user, error_code=error_code
        )
        return Response({"requeued": requeued, "job": job.id})

    @extend_schema(request=None, responses=s.ReextractResultSerializer, summary="Re-extract stored pages (a job)")
    @action(detail=True, methods=["post"])
    def reextract(self, request: Request, slug: str) -> Response:
        """Extract the project's stored pages again with its current rules and spider; nothing is
        refetched. The answer names the job and the pages queued for extraction."""
        project = self.get_object()
        _job, queued = jobs.crawl_reextract(project=project, trigger=Job.Trigger.API, user=request.user)
        return self._result(project, queued=queued)

    @extend_schema(responses=s.ProgressSerializer, summary="Pages and assets per state, failures per error code")
    @action(detail=True, methods=["get"])
    def progress(self, request: Request, slug: str) -> Response:
        project = self.get_object()
        backlog, job_open = stage_backlog(project), jobs_open([project])
        warnings = pipeline_warnings(backlog, rendered=project.render_js, job_open=job_open)
        return Response(project_progress(project) | {"errors": project_errors(project), "warnings": warnings})

    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        summary="Health: ok / warning / failing with the reason, and the figures of the last ?hours=1",
        parameters=[OpenApiParameter("hours", float, description="The window of the figures (at most 720).")],
    )
    @action(detail=True, methods=["get"])
    def health(self, request: Request, slug: str) -> Response:
        project = self.get_object()
        try:
            hours = float(request.query_params.get("hours", "1"))
        except ValueError:
            hours = -1.0
        if not 0 < hours <= 720:
            return Response({"hours": ["a number of hours above 0, at most 720"]}, status=400)
        return Response(project_health(project.id) | {"figures": health_figures(project.id, hours=hours)})

    @extend_schema(
        summary="Export pages, items (CSV: a column per field) or assets as JSON lines or CSV, streamed, or "
        "stored pages as WARC",
        parameters=[
            OpenApiParameter(
                "format", enum=["jsonl", "csv", "warc"], default="jsonl", description="File format (warc: pages)."
            ),
            OpenApiParameter("what", enum=["assets", "items", "pages"], default="pages", description="Rows."),
            OpenApiParameter("kind", str, description="Only rows of this kind (items: page, rule:NAME, api, spider)."),
            OpenApiParameter(
                "job",
                int,
                description="Only what this job produced (items: whose data it extracted, even after a "
                "later re-extract).",
            ),
            OpenApiParameter("since", OpenApiTypes.DATETIME, description="Only rows changed since this time."),
        ],
        responses={
            (200, CONTENT_TYPES["jsonl"]): OpenApiTypes.STR,
            (200, CONTENT_TYPES["csv"]): OpenApiTypes.STR,
            (200, "application/warc"): OpenApiTypes.BINARY,
        },
    )
    @action(
        detail=True,
        methods=["get"],
        renderer_classes=[JSONRenderer],
        content_negotiation_class=_FirstRenderer,
        filter_backends=[],
    )
    def export(self, request: Request, slug: str):
        project = self.get_object()
        query = s.ExportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        if query.validated_data["format"] == "warc":
            return warc_response(project)
        data = query.validated_data
        return export_response(project, what=data["what"], fmt=data["format"], rows=query.rows())


def _refuse_network_changes(user, changed: list[str]) -> None:
    """A 403 naming the network settings a request would change, unless the user may change them."""
    if changed and not may(user, "network"):
        raise PermissionDenied(network_refusal(changed))


def _refuse_off_site(user, seed: Seed | None, data: dict) -> None:
    """A 403 for a new seed URL off the sites of a project that holds secrets (its cookies and
    headers would follow, and its proxy would carry it), unless the user may change network settings."""
    project = data.get("project") or seed.project
    url = data.get("url")
    if url is None or (seed is not None and url == seed.url) or may(user, "network"):
        return
    if refusal := secrets_refusal(project, url):
        raise PermissionDenied(refusal)


def _seed_header_changes(seed: Seed | None, data: dict) -> list[str]:
    """A seed's headers are request headers: a network setting of their own."""
    return ["headers"] if "headers" in data and data["headers"] != (seed.headers if seed else {}) else []


class SeedViewSet(ProjectScopedMixin, viewsets.ModelViewSet):
    """Start URLs. A new active seed of an active project goes into the frontier and to the fetch workers."""

    queryset = Seed.objects.select_related("project")
    action_permissions = read_write("seed")
    serializer_class = s.SeedSerializer
    filterset_class = SeedFilter
    lookup_value_regex = s.ID_PATTERN

    @transaction.atomic
    def perform_create(self, serializer: s.SeedSerializer) -> None:
        _refuse_network_changes(self.request.user, _seed_header_changes(None, serializer.validated_data))
        _refuse_off_site(self.request.user, None, serializer.validated_data)
        self._enqueue(serializer.save())

    @transaction.atomic
    def perform_update(self, serializer: s.SeedSerializer) -> None:
        _refuse_network_changes(self.request.user, _seed_header_changes(serializer.instance, serializer.validated_data))
        _refuse_off_site(self.request.user, serializer.instance, serializer.validated_data)
        self._enqueue(serializer.save())

    def perform_destroy(self, instance: Seed) -> None:
        instance.delete()  # crawl/signals.py moves the project's change stamp

    def _enqueue(self, seed: Seed) -> None:
        """An active project crawls the new frontier row as a job (its running one, or a new one); a
        paused project keeps it queued: resume publishes it."""
        if not seed.active:
            return
        steering.seeds_add_as_job(
            project=seed.project, urls=[seed.url], kind=seed.kind, trigger=Job.Trigger.API, user=self.request.user
        )
