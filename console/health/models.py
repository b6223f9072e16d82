"""Health counters, monitors, their alerts and where alerts are sent (imported by console.models)."""

from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from console.health.validators import monitor_problems, quiet_problems, url_problem


class HealthCounter(models.Model):
    """One rolling counter: how many times `metric` happened for a project (or one of its hosts or
    rule sets) within the time bucket starting at `bucket` (CONSOLE_HEALTH_BUCKET_SECONDS long).
    Added to by the pipeline as it works (crawl/health.py), never recounted from the pages."""

    project = models.ForeignKey("crawl.Project", on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=10, help_text="project, host or rules.")
    key = models.CharField(
        max_length=262, blank=True, default="", help_text="The server (host[:port]), or the rule set's item kind."
    )
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


BUILT_IN_KINDS = (
    "site_down",
    "template_changed",
    "job_failed",
    "job_stalled",
    "no_worker",
    "host_backoff",
    "host_blocked",
    "zero_throughput",
    "sink_failing",
)


class Monitor(models.Model):
    """A check of a project. Built in: every project has each such kind (console/health/monitors.py makes
    the rows), with its thresholds: the defaults, with what `thresholds` overrides. A rule of the
    user's own (console/health/rules.py) has a name, what it watches, a threshold and a window."""

    class Kind(models.TextChoices):
        SITE_DOWN = "site_down", "site down"
        TEMPLATE_CHANGED = "template_changed", "template changed"
        JOB_FAILED = "job_failed", "job failed"
        JOB_STALLED = "job_stalled", "job stalled"
        NO_WORKER = "no_worker", "no worker for owed work"
        HOST_BACKOFF = "host_backoff", "host blocked or backing off"
        HOST_BLOCKED = "host_blocked", "host answers block pages"
        ZERO_THROUGHPUT = "zero_throughput", "zero throughput while active"
        ITEMS_PER_RUN = "items_per_run", "items of a rule set per run below N"
        FILL_RATE = "fill_rate", "a field's fill rate under X%"
        ERRORS_PER_HOUR = "errors_per_hour", "errors of a code above Y per hour"
        PAGES_PER_MINUTE = "pages_per_minute", "pages per minute under Z while a job runs"
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
    urgent = models.BooleanField(
        default=False, help_text="Sent at once, even in a target's quiet hours (others wait until they end)."
    )
    name = models.CharField(max_length=100, blank=True, default="", help_text="A rule's name (rules of your own).")
    watch = models.CharField(
        max_length=200,
        blank=True,
        default="",
        help_text="What a rule of your own watches: a rule set (items per run), rule set.field (fill rate), "
        "an error code (errors per hour); nothing for pages per minute.",
    )
    threshold = models.FloatField(
        null=True, blank=True, help_text="N items, X percent, Y errors or Z pages (rules of your own)."
    )
    window_minutes = models.PositiveIntegerField(
        null=True, blank=True, help_text="The time a rule of your own looks back (not for items per run)."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "kind"],
                condition=models.Q(kind__in=BUILT_IN_KINDS),
                name="uniq_monitor_project_kind",
            ),
            models.UniqueConstraint(
                fields=["project", "name"], condition=~models.Q(name=""), name="uniq_monitor_project_name"
            ),
        ]
        ordering = ["project_id", "kind", "id"]

    def __str__(self) -> str:
        return f"{self.name or self.get_kind_display()} ({self.project})"

    @property
    def built_in(self) -> bool:
        return self.kind in BUILT_IN_KINDS

    @property
    def title(self) -> str:
        """How messages name it: a rule's own name, else its kind."""
        return self.name or self.get_kind_display()

    def clean(self) -> None:
        if problems := monitor_problems(self):
            raise ValidationError(problems)


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
    quiet_from = models.TimeField(
        null=True, blank=True, help_text="Quiet hours start (e.g. 22:00): non-urgent messages wait until they end."
    )
    quiet_until = models.TimeField(null=True, blank=True, help_text="Quiet hours end (e.g. 07:00).")
    quiet_timezone = models.CharField(
        max_length=60, default="UTC", help_text="The time zone of the quiet hours, e.g. Europe/Paris."
    )

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        problems = quiet_problems(self.quiet_from, self.quiet_until, self.quiet_timezone)
        if problem := url_problem(self.url):
            problems["url"] = problem
        if problems:
            raise ValidationError(problems)


class HeldNotice(models.Model):
    """A non-urgent message held for a target in its quiet hours, sent when they end
    (console/health/quiet.py). Deleted once sent."""

    target = models.ForeignKey(NotificationTarget, on_delete=models.CASCADE, related_name="held")
    title = models.CharField(max_length=300)
    body = models.TextField()
    kind = models.CharField(max_length=10, default="info", help_text="Apprise's type: info, success, failure.")
    send_after = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.title} (after {self.send_after:%H:%M})"
