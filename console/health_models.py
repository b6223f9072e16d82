"""Health counters, monitors, their alerts and where alerts are sent (imported by console.models)."""

from django.db import models
from django.utils import timezone


class HealthCounter(models.Model):
    """One rolling counter: how many times `metric` happened for a project (or one of its hosts or
    rule sets) within the time bucket starting at `bucket` (CONSOLE_HEALTH_BUCKET_SECONDS long).
    Added to by the pipeline as it works (crawl/health.py), never recounted from the pages."""

    project = models.ForeignKey("crawl.Project", on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=10, help_text="project, host or rules.")
    key = models.CharField(max_length=255, blank=True, default="", help_text="The host, or the rule set's item kind.")
    metric = models.CharField(max_length=120, help_text="fetch_ok, fetch_failed, error:<code>, items, field:<name>...")
    bucket = models.DateTimeField(help_text="Start of the time bucket.")
    value = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "scope", "key", "metric", "bucket"], name="uniq_health_counter")
        ]
        indexes = [models.Index(fields=["project", "bucket"], name="health_project_bucket")]

    def __str__(self) -> str:
        return f"{self.scope} {self.key} {self.metric} @ {self.bucket:%H:%M:%S}: {self.value}"


class Monitor(models.Model):
    """A built-in check of a project (every project has each kind; console/monitors.py makes the
    rows), with its thresholds: the defaults, with what `thresholds` overrides."""

    class Kind(models.TextChoices):
        SITE_DOWN = "site_down", "site down"
        TEMPLATE_CHANGED = "template_changed", "template changed"
        JOB_FAILED = "job_failed", "job failed"
        JOB_STALLED = "job_stalled", "job stalled"
        NO_WORKER = "no_worker", "no worker for owed work"
        HOST_BACKOFF = "host_backoff", "host blocked or backing off"
        ZERO_THROUGHPUT = "zero_throughput", "zero throughput while active"
        SINK_FAILING = "sink_failing", "sink failing"

    project = models.ForeignKey("crawl.Project", on_delete=models.CASCADE, related_name="monitors")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    enabled = models.BooleanField(default=True)
    thresholds = models.JSONField(
        default=dict, blank=True, help_text='Overrides of the kind\'s default thresholds, e.g. {"minutes": 20}.'
    )
    cooldown_minutes = models.PositiveIntegerField(
        default=30, help_text="A condition that comes back this soon after recovering is not announced again."
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "kind"], name="uniq_monitor_project_kind")]
        ordering = ["project_id", "kind"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} ({self.project})"

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        from console.monitors import thresholds_problem

        if problem := thresholds_problem(self.kind, self.thresholds):
            raise ValidationError({"thresholds": problem})


class Alert(models.Model):
    """One firing of a monitor on one subject (a host, a rule set's field, a stage, the project's
    jobs): open while the condition holds, resolved when it recovers. Announced once each way."""

    project = models.ForeignKey("crawl.Project", on_delete=models.CASCADE, related_name="alerts")
    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="alerts")
    subject = models.CharField(max_length=300, help_text="What it is about: a host, a rule set's field, a stage.")
    message = models.TextField(help_text="What was seen, in a sentence.")
    evidence = models.JSONField(default=dict, blank=True, help_text="The figures behind it.")
    since = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)
    notify_after = models.DateTimeField(default=timezone.now, help_text="Not announced before (the cooldown).")
    notified_at = models.DateTimeField(null=True, blank=True, help_text="When its firing was announced.")
    recovery_notified_at = models.DateTimeField(null=True, blank=True, help_text="When its recovery was announced.")
    notify_error = models.TextField(blank=True, default="", help_text="Targets that refused the last message.")

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["monitor", "subject"], condition=models.Q(resolved_at__isnull=True), name="uniq_alert_open"
            )
        ]
        indexes = [models.Index(fields=["project", "resolved_at"], name="alert_project_open")]

    def __str__(self) -> str:
        return f"{self.monitor.get_kind_display()}: {self.subject}"

    @property
    def open(self) -> bool:
        return self.resolved_at is None


class NotificationTarget(models.Model):
    """Where a project's alerts go, as an Apprise URL (mailto://, slack://, json://, ...). Without a
    project: every project's (beside its own). Set by admins only: alerts are sent from the
    workers to these addresses directly, not through the crawl's egress guard."""

    project = models.ForeignKey(
        "crawl.Project",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="notification_targets",
        help_text="Empty: every project's alerts.",
    )
    name = models.CharField(max_length=100, help_text="A name people recognise: team Slack, on-call email.")
    url = models.TextField(help_text="An Apprise URL, e.g. slack://T000/B000/XXXX or mailtos://user:pass@host.")
    enabled = models.BooleanField(default=True)

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        from console.notify import url_problem

        if problem := url_problem(self.url):
            raise ValidationError({"url": problem})
