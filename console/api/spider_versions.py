"""A project's spider code versions in the API: list and read them (scrape.view_spiderversion),
deploy a new one and activate an older one (scrape.deploy_spider: the code runs in the workers).

    GET  /api/projects/<slug>/spider-versions/                 the versions, newest first
    POST /api/projects/<slug>/spider-versions/                 {"source": "...", "message": "...", "force": false}
    GET  /api/projects/<slug>/spider-versions/<n>/             one version, with its source
    POST /api/projects/<slug>/spider-versions/<n>/activate/    point the project at it (a rollback)

A refused deploy is a 400 whose `detail` names the line, with `line` apart; nothing is saved.
"""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.access.policy import projects_for
from crawl.models import Project
from scrape.models import SpiderVersion
from scrape.spider_code import SpiderCodeError
from scrape.spider_versions import DeployRefused, spider_version_activate, spider_version_deploy

VIEW, DEPLOY = "scrape.view_spiderversion", "scrape.deploy_spider"


class SpiderVersionSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    active = serializers.SerializerMethodField()

    class Meta:
        model = SpiderVersion
        fields = ("number", "sha256", "spider_name", "message", "created_by", "created_at", "active")

    def get_active(self, version: SpiderVersion) -> bool:
        return version.project.spider_version_id == version.id


class SpiderVersionSourceSerializer(SpiderVersionSerializer):
    class Meta(SpiderVersionSerializer.Meta):
        fields = (*SpiderVersionSerializer.Meta.fields, "source")


class DeploySerializer(serializers.Serializer):
    source = serializers.CharField(trim_whitespace=False, max_length=1_000_000, help_text="The spider module.")
    message = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)
    force = serializers.BooleanField(required=False, default=False, help_text="Deploy even if checks fail.")


class _ProjectVersions(APIView):
    permission_classes = [IsAuthenticated]

    def _project(self, request: Request, slug: str, permission: str) -> Project:
        if not request.user.has_perm(permission):
            raise PermissionDenied(f"This needs the {permission} permission.")
        return get_object_or_404(projects_for(request.user), slug=slug)


class SpiderVersionListView(_ProjectVersions):
    @extend_schema(responses=SpiderVersionSerializer(many=True), summary="List a project's spider versions")
    def get(self, request: Request, slug: str) -> Response:
        project = self._project(request, slug, VIEW)
        versions = SpiderVersion.objects.filter(project=project).select_related("project", "created_by")
        return Response(SpiderVersionSerializer(versions.order_by("-number"), many=True).data)

    @extend_schema(request=DeploySerializer, responses=SpiderVersionSerializer, summary="Deploy spider code")
    def post(self, request: Request, slug: str) -> Response:
        """Store the source as the project's next version and activate it; refused (400, nothing
        saved) when it does not compile, defines no spider, names a missing route or fails a check."""
        project = self._project(request, slug, DEPLOY)
        form = DeploySerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            version = spider_version_deploy(project=project, user=request.user, **form.validated_data)
        except SpiderCodeError as exc:
            body = {"detail": str(exc), "line": exc.line}
            if isinstance(exc, DeployRefused):
                body["differences"] = exc.differences
            return Response(body, status=400)
        version.project = project
        return Response(SpiderVersionSerializer(version).data, status=201)


class SpiderVersionDetailView(_ProjectVersions):
    @extend_schema(responses=SpiderVersionSourceSerializer, summary="One spider version, with its source")
    def get(self, request: Request, slug: str, number: int) -> Response:
        project = self._project(request, slug, VIEW)
        version = get_object_or_404(SpiderVersion.objects.select_related("project"), project=project, number=number)
        return Response(SpiderVersionSourceSerializer(version).data)


class SpiderVersionActivateView(_ProjectVersions):
    @extend_schema(request=None, responses=SpiderVersionSerializer, summary="Activate a version (roll back)")
    def post(self, request: Request, slug: str, number: int) -> Response:
        project = self._project(request, slug, DEPLOY)
        version = get_object_or_404(SpiderVersion, project=project, number=number)
        spider_version_activate(project=project, version=version)
        version.project = project
        return Response(SpiderVersionSerializer(version).data)
