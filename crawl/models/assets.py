"""Media assets (one row per source URL of a project) and the page <-> asset links.

The frontier owns their states and leases (crawl/frontier/assets.py), so the models are declared
here, below the media app; they keep the media app's label (its tables, admin pages, permissions
and migrations), and media/models.py names them for Django."""

from django.db import models
from django.db.models import Q
from django.utils import timezone


class MediaAsset(models.Model):
    class Kind(models.TextChoices):
        IMAGE = "image", "image"
        VIDEO = "video", "video"
        AUDIO = "audio", "audio"
        FILE = "file", "file"

    class State(models.TextChoices):
        QUEUED = "queued", "queued"
        LEASED = "leased", "leased"
        DONE = "done", "done"
        FAILED = "failed", "failed"

    project = models.ForeignKey("crawl.Project", on_delete=models.CASCADE, related_name="assets")
    url = models.TextField(help_text="Canonical source URL.")
    url_key = models.CharField(max_length=64, help_text="sha256 of the canonical source URL.")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.FILE)
    downloader = models.CharField(
        max_length=20, default="http", help_text="http, ytdlp or gallerydl (decided by the project's media rules)."
    )
    metadata = models.JSONField(default=dict, blank=True, help_text="What the downloader reported (yt-dlp: title...).")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    lease_token = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_fetch_at = models.DateTimeField(default=timezone.now)
    suspect = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Its worker died holding it among others: it is downloaded alone, so an asset that kills "
        "workers fails alone.",
    )
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    sha256 = models.CharField(max_length=64, blank=True, default="", db_index=True)
    size = models.BigIntegerField(null=True, blank=True)
    mime = models.CharField(max_length=200, blank=True, default="")
    storage_key = models.CharField(max_length=300, blank=True, default="", help_text="Key in the media storage.")
    downloaded_at = models.DateTimeField(null=True, blank=True)
    downloaded_by = models.CharField(max_length=200, blank=True, default="", help_text="Worker that downloaded it.")
    error_code = models.CharField(max_length=40, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    job_id = models.BigIntegerField(null=True, blank=True, help_text="The job that last claimed it (its project's).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "media"
        constraints = [models.UniqueConstraint(fields=["project", "url_key"], name="uniq_asset_project_urlkey")]
        indexes = [
            models.Index(fields=["project", "state"], name="asset_project_state"),
            models.Index(fields=["state", "lease_expires_at"], name="asset_state_lease"),
            models.Index(fields=["state", "enqueued_at"], name="asset_state_enqueued", condition=Q(state="queued")),
            models.Index(  # the download stage's claim: a project's queued assets by due time
                fields=["project", "next_fetch_at"],
                name="asset_ready",
                condition=Q(state="queued", suspect=False),
            ),
            models.Index(fields=["job_id", "state"], name="asset_job_state", condition=Q(job_id__isnull=False)),
        ]

    def __str__(self) -> str:
        return self.url


class PageAsset(models.Model):
    """Provenance: which page referenced which asset."""

    page = models.ForeignKey("crawl.Page", on_delete=models.CASCADE, related_name="asset_links")
    asset = models.ForeignKey(MediaAsset, on_delete=models.CASCADE, related_name="page_links")

    class Meta:
        app_label = "media"
        constraints = [models.UniqueConstraint(fields=["page", "asset"], name="uniq_page_asset")]
