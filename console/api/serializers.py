"""What the API reads and writes: projects and seeds (validated like the admin), and read-only results."""

import copy
import difflib
import re
from collections.abc import Mapping

from django_celery_beat.validators import crontab_validator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from console.access.policy import may, projects_for
from console.exports.rows import FIELDS, ExportFilter
from console.masking import MASK
from core.storage import StorageUnavailable, object_url
from crawl.models import MediaAsset, Page, Project, Seed
from crawl.services.projects import project_named_alike, seed_problem, slug_free
from crawl.validators import cookie_map
from scrape.models import Item

from .fields import ApiConfigField, SecretMapField, SecretURLField

SLUG_PATTERN = r"[-a-zA-Z0-9_]+"
ID_PATTERN = "[0-9]{1,18}"  # lookups by id: anything else is a 404 before any query
MAX_ID = 2**63 - 1


class ProjectSlugField(serializers.SlugRelatedField):
    """A project by its slug; anything that is not a slug is refused before the database sees it."""

    def __init__(self, **kwargs):
        super().__init__(slug_field="slug", queryset=Project.objects.all(), **kwargs)

    def get_queryset(self):
        """Only the projects the user may see: another team's slug does not exist."""
        request = self.context.get("request")
        return projects_for(request.user) if request is not None else Project.objects.none()

    def to_internal_value(self, data):
        if not isinstance(data, str) or not re.fullmatch(SLUG_PATTERN, data):
            self.fail("does_not_exist", slug_name=self.slug_field, value=str(data)[:200])
        return super().to_internal_value(data)


class KnownFieldsOnly:
    """Refuse (400, naming it) a field the serializer does not have: a typo such as "maxpages"
    would otherwise be ignored, and make an unlimited crawl. Read-only fields are known (a body
    read from the API may be sent back)."""

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            unknown = sorted(str(name) for name in data if name not in self.fields)
            if unknown:
                raise serializers.ValidationError({name: [_unknown(name, self.fields)] for name in unknown})
        return super().to_internal_value(data)


def _unknown(name: str, fields) -> str:
    close = difflib.get_close_matches(name, list(fields), n=1)
    return "Unknown field." + (f" Did you mean {close[0]!r}?" if close else "")


WRITE_ONLY = ' Values are write-only: answered as "***" (sending "***" back keeps the stored value).'


def _help(field: str) -> str:
    return str(Project._meta.get_field(field).help_text)


class ProjectSerializer(KnownFieldsOnly, serializers.ModelSerializer):
    api_config = ApiConfigField(required=False, help_text=Project._meta.get_field("api_config").help_text)
    request_headers = SecretMapField(required=False, help_text=_help("request_headers") + WRITE_ONLY)
    cookies = SecretMapField(required=False, validators=[cookie_map], help_text=_help("cookies") + WRITE_ONLY)
    proxy = SecretURLField(
        required=False, allow_blank=True, max_length=300, help_text=_help("proxy") + " Its password is write-only."
    )

    class Meta:
        model = Project
        exclude = ("bucket_tokens", "bucket_updated_at")
        read_only_fields = ("created_at", "rules_changed_at")
        extra_kwargs = {
            # The list fields (patterns, hosts, media kinds, extensions, MIME types) bring their
            # validators from the model (crawl/validators.py), as the admin's form does.
            "slug": {
                "required": False,
                "validators": [],  # validate_slug: a slug another team holds is never an error
                "help_text": "Short identifier used in URLs. Default: made from the name. When a project you "
                "do not see holds it, the first free one after it (slug-2, ...) is given.",
            },
            "status": {
                "help_text": "A new project is active (seeds added to it are crawled at once, as a job) or "
                "paused (nothing is fetched until Start). Afterwards it changes through start, pause and resume."
            },
            "recrawl_crontab": {"validators": [crontab_validator]},
            "concurrency": {"min_value": 1},
            "max_per_host": {"min_value": 1},
            "rate_burst": {"min_value": 1},
            "min_delay": {"min_value": 0, "max_value": 86400},
            "rate_limit": {"min_value": 0, "max_value": 1_000_000},
        }

    def validate_name(self, name: str) -> str:
        """One project per name up to case and punctuation (its slug) among those the user sees:
        never a silent "-2". Another team's names are unknown here, so they refuse nothing."""
        alike = project_named_alike(name, among=self._seen())
        if alike is None or alike == self.instance:
            return name
        raise serializers.ValidationError(
            f"The project {alike.name!r} (slug {alike.slug}) has this name but for case or punctuation: "
            "use it, or choose another name."
        )

    def validate_status(self, status: str) -> str:
        """Honoured when the project is created (active or paused); afterwards the status is the
        steering's (start, pause, resume: they run the jobs), and sending it back unchanged is fine."""
        if self.instance is None and status == Project.Status.STOPPED:
            raise serializers.ValidationError("A new project is active or paused.")
        if self.instance is not None and status != self.instance.status:
            raise serializers.ValidationError(
                "Change it with the project's start, pause or resume action (they run its jobs)."
            )
        return status

    def validate_slug(self, slug: str) -> str:
        """A slug held by a project the user sees is refused; one held by a project they do not see
        becomes the first free one after it, as a made-up slug would, so no error tells of it."""
        holder = Project.objects.filter(slug=slug).first()
        if holder is None or holder == self.instance:
            return slug
        if self._seen().filter(pk=holder.pk).exists():
            raise serializers.ValidationError(f"The project {holder.name!r} has this slug: choose another one.")
        return slug_free(slug)

    def _seen(self):
        request = self.context.get("request")
        return projects_for(request.user) if request is not None else Project.objects.all()

    def validate(self, attrs: dict) -> dict:
        """The model's own cross-field rules (one recrawl schedule, a valid crontab), on the would-be row."""
        candidate = copy.copy(self.instance) if self.instance is not None else Project()
        for field, value in attrs.items():
            setattr(candidate, field, value)
        candidate.clean()  # a Django ValidationError becomes a 400 with the same field errors
        return attrs


class SeedSerializer(KnownFieldsOnly, serializers.ModelSerializer):
    project = ProjectSlugField(help_text="Slug of the seed's project.")
    url = serializers.CharField(max_length=2000, help_text="Start URL (http or https).")
    method = serializers.ChoiceField(choices=["GET", "POST"], default="GET", help_text="GET or POST.")
    headers = SecretMapField(required=False, help_text="Extra headers for this seed's request." + WRITE_ONLY)

    class Meta:
        model = Seed
        fields = (
            "id", "project", "url", "kind", "active", "priority", "method", "body", "headers", "from_robots",
            "created_at",
        )  # fmt: skip
        read_only_fields = ("from_robots",)
        validators = []  # uniqueness is checked in validate(), with a message that says what is wrong

    def to_representation(self, instance):
        """A POST body may be a secret (a login form, an API key): only those who may change the
        project read it."""
        shown = super().to_representation(instance)
        request = self.context.get("request")
        if shown.get("body") and not (request and may(request.user, "change", instance.project)):
            shown["body"] = MASK
        return shown

    def validate(self, attrs: dict) -> dict:
        """A seed is checked like every URL the crawler would fetch; a refused one says why."""
        project = attrs.get("project") or self.instance.project
        if self.instance is not None and project.id != self.instance.project_id:
            raise serializers.ValidationError({"project": "A seed cannot move to another project."})
        if "url" in attrs and (problem := seed_problem(attrs["url"], allow_private=project.allow_private)):
            raise serializers.ValidationError({"url": problem})
        url = attrs.get("url", getattr(self.instance, "url", None))
        duplicate = Seed.objects.filter(project=project, url=url).exclude(id=getattr(self.instance, "id", None))
        if duplicate.exists():
            raise serializers.ValidationError({"url": "The project already has this seed."})
        return attrs


class PageSerializer(serializers.ModelSerializer):
    """A frontier row, without its stored body or request overrides."""

    project = serializers.CharField(source="project.slug", read_only=True)

    class Meta:
        model = Page
        fields = (
            "id",
            "project",
            "url",
            "final_url",
            "host",
            "depth",
            "is_seed",
            "kind",
            "discovered_from",
            "redirect_hops",
            "state",
            "attempts",
            "priority",
            "next_fetch_at",
            "status_code",
            "content_type",
            "title",
            "content_sha256",
            "content_length",
            "fetched_at",
            "fetch_ms",
            "fetch_count",
            "change_count",
            "changed_at",
            "parsed",
            "error_code",
            "error_message",
            "created_at",
            "updated_at",
        )
        read_only_fields = fields


class FailureSerializer(serializers.ModelSerializer):
    project = serializers.CharField(source="project.slug", read_only=True)

    class Meta:
        model = Page
        fields = (
            "id",
            "project",
            "url",
            "host",
            "depth",
            "is_seed",
            "status_code",
            "error_code",
            "error_message",
            "attempts",
            "fetched_at",
            "updated_at",
        )
        read_only_fields = fields


class ItemSerializer(serializers.ModelSerializer):
    project = serializers.CharField(source="project.slug", read_only=True)
    url = serializers.CharField(source="page.url", read_only=True, help_text="URL of the page it came from.")
    data = serializers.JSONField(read_only=True, help_text="The extracted fields.")
    errors = serializers.JSONField(read_only=True, help_text="Validation errors, if any (the item is kept).")

    class Meta:
        model = Item
        fields = ("id", "project", "page", "url", "kind", "position", "rule_version", "data", "errors", "updated_at")
        read_only_fields = fields


class AssetSerializer(serializers.ModelSerializer):
    project = serializers.CharField(source="project.slug", read_only=True)
    metadata = serializers.JSONField(read_only=True, help_text="What the downloader reported.")
    download_url = serializers.SerializerMethodField(help_text="Presigned S3 URL or storage URL; null until stored.")

    class Meta:
        model = MediaAsset
        fields = (
            "id",
            "project",
            "url",
            "kind",
            "downloader",
            "state",
            "status_code",
            "sha256",
            "size",
            "mime",
            "storage_key",
            "download_url",
            "metadata",
            "attempts",
            "downloaded_at",
            "error_code",
            "error_message",
            "created_at",
            "updated_at",
        )
        read_only_fields = fields

    @extend_schema_field(serializers.URLField(allow_null=True))
    def get_download_url(self, asset: MediaAsset) -> str | None:
        if asset.state != MediaAsset.State.DONE or not asset.storage_key:
            return None
        try:
            url = object_url(asset.storage_key)
        except StorageUnavailable:
            return None
        request = self.context.get("request")
        return request.build_absolute_uri(url) if request is not None and url.startswith("/") else url


# --- Action inputs and outputs ------------------------------------------------------------------


class RetryFailedSerializer(KnownFieldsOnly, serializers.Serializer):
    error_code = serializers.CharField(
        required=False, allow_blank=True, max_length=40, help_text="Only failures with this error code."
    )


class RecrawlSerializer(KnownFieldsOnly, serializers.Serializer):
    due = serializers.BooleanField(
        default=False, help_text="Only the pages whose revisit is due (what the schedule would fetch)."
    )


class AssetsRetrySerializer(KnownFieldsOnly, serializers.Serializer):
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID),
        min_length=1,
        max_length=10_000,
        help_text="Ids of failed media assets; assets that are not failed are left alone.",
    )


class PagesRequeuedSerializer(serializers.Serializer):
    requeued = serializers.IntegerField(help_text="Finished or failed pages queued again.")


class AssetsRequeuedSerializer(serializers.Serializer):
    requeued = serializers.IntegerField(help_text="Failed assets queued again with fresh attempts.")


class PagesRetrySerializer(KnownFieldsOnly, serializers.Serializer):
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID),
        min_length=1,
        max_length=10_000,
        help_text="Ids of failed pages; pages that are not failed are left alone.",
    )


class ExportQuerySerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=["jsonl", "csv", "warc"], default="jsonl")
    what = serializers.ChoiceField(choices=sorted(FIELDS), default="pages")
    kind = serializers.CharField(required=False, max_length=80, help_text="Only rows of this kind.")
    job = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, help_text="Only this job's rows.")
    since = serializers.DateTimeField(required=False, help_text="Only rows changed since (ISO 8601).")

    def validate(self, attrs: dict) -> dict:
        if attrs["format"] == "warc" and attrs["what"] != "pages":
            raise serializers.ValidationError({"what": "A WARC holds stored pages: drop what or use what=pages."})
        if attrs["format"] == "warc" and {"kind", "job", "since"} & set(attrs):
            raise serializers.ValidationError({"format": "kind, job and since filter the jsonl and csv exports."})
        return attrs

    def rows(self) -> ExportFilter:
        data = self.validated_data
        return ExportFilter(kind=data.get("kind") or None, job=data.get("job"), since=data.get("since"))


class ActionResultSerializer(serializers.Serializer):
    project = serializers.CharField(help_text="Slug of the project.")
    status = serializers.ChoiceField(choices=Project.Status.choices)
    job = serializers.IntegerField(allow_null=True, help_text="The job the action runs as (or joined).")


class PublishedResultSerializer(ActionResultSerializer):
    published = serializers.IntegerField(help_text="Queued pages handed to the fetch workers.")


class PauseResultSerializer(ActionResultSerializer):
    changed = serializers.BooleanField(help_text="False when the project was already paused.")


class QueuedResultSerializer(ActionResultSerializer):
    queued = serializers.IntegerField(help_text="Finished pages queued again (the reaper publishes them).")


class ReextractResultSerializer(ActionResultSerializer):
    queued = serializers.IntegerField(help_text="Stored pages queued for extraction again.")


class RequeuedResultSerializer(serializers.Serializer):
    requeued = serializers.IntegerField(help_text="Failed pages queued again with fresh attempts.")
    job = serializers.IntegerField(help_text="The job the retry runs as (or joined).")


class ProgressSerializer(serializers.Serializer):
    pages = serializers.DictField(child=serializers.IntegerField(), help_text="Pages per state.")
    assets = serializers.DictField(child=serializers.IntegerField(), help_text="Assets per state.")
    pending = serializers.IntegerField(help_text="Work still owed.")
    pages_not_parsed = serializers.IntegerField(help_text="Done pages stored but not parsed (not HTML).")
    retrying = serializers.ListField(
        child=serializers.DictField(),
        help_text="Queued pages waiting out a back-off after an error, per error code: code, pages, message, "
        "next_at (when the next is due).",
    )
    errors = serializers.DictField(child=serializers.IntegerField(), help_text="Failed pages per error code.")
    warnings = serializers.ListField(
        child=serializers.CharField(),
        help_text="Work owed that no live worker takes (no worker consumes a stage's queue), one sentence each.",
    )
