"""A project's sinks and their outbox (their tables keep the names they had in the scrape app)."""

from django.db import models
from django.db.models import Q
from django.utils import timezone


class Sink(models.Model):
    class Kind(models.TextChoices):
        FILE = "file", "files (one per record)"
        REDIS = "redis", "Redis list or hash"
        TAR = "tar", "tar archives (.tar, .tar.gz, .tar.bz2)"
        JSONL = "jsonl", "JSON Lines on the media storage (disk or S3)"
        PYTHON = "python", "a Python class of your own"
        HTTP = "http", "HTTP (signed JSON POSTs: a webhook)"

    project = models.ForeignKey("crawl.Project", on_delete=models.CASCADE, related_name="sinks")
    name = models.SlugField(max_length=80, help_text="Unique within the project; used in file and key schemes.")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    config = models.JSONField(
        default=dict, blank=True, help_text="The kind's settings (docs/spiders-and-rules.md, Result sinks), as JSON."
    )
    items = models.BooleanField(default=True, help_text="Deliver every stored item.")
    pages = models.BooleanField(default=False, help_text="Also deliver each extracted page's record.")
    assets = models.BooleanField(default=False, help_text="Also deliver each stored media asset's record.")
    active = models.BooleanField(default=True, help_text="An inactive sink receives nothing new.")
    created_at = models.DateTimeField(auto_now_add=True)
    failing_since = models.DateTimeField(
        null=True, blank=True, help_text="When its deliveries began to fail; empty once one succeeds again."
    )

    class Meta:
        db_table = "scrape_sink"
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="uniq_sink_project_name")]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    def clean(self) -> None:
        from .kinds import sink_check

        sink_check(self)


class SinkDelivery(models.Model):
    """One record owed to one sink: pending -> leased (a batch being written) -> done, or failed
    after CRAWL_SINK_MAX_ATTEMPTS. `batch` names the batch a record was first leased in: a batch
    whose worker died is leased again whole, so batch-shaped sinks (tar, JSON Lines) rewrite the
    same object instead of writing its records a second time."""

    class State(models.TextChoices):
        PENDING = "pending", "pending"
        LEASED = "leased", "leased"
        DONE = "done", "done"
        FAILED = "failed", "failed"

    sink = models.ForeignKey(Sink, on_delete=models.CASCADE, related_name="deliveries")
    key = models.CharField(max_length=200, help_text="Stable record key: a redelivered record has the same one.")
    record = models.JSONField(help_text="What is delivered.")
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    batch = models.CharField(max_length=40, blank=True, default="")
    lease_token = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_at = models.DateTimeField(default=timezone.now)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "scrape_sinkdelivery"
        constraints = [models.UniqueConstraint(fields=["sink", "key"], name="uniq_delivery_sink_key")]
        indexes = [
            models.Index(
                fields=["sink", "state", "next_at"], name="delivery_owed", condition=Q(state__in=("pending", "leased"))
            ),
        ]
        verbose_name_plural = "sink deliveries"

    def __str__(self) -> str:
        return self.key
