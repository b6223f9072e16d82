"""Jobs (every run of a project is one), their logs, and the workers' heartbeats."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class Job(models.Model):
    """One run of a project: a start (admin, API, `crawl`), a scheduled recrawl tick, a recrawl, a
    re-extraction or a retry of failures. Its rows are the pages and assets stamped with its id
    (crawl_page.job_id), so its counts are read from them while it runs and kept in `stats` when it
    ends."""

    class State(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        PAUSED = "paused", "paused"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"

    class Kind(models.TextChoices):
        CRAWL = "crawl", "crawl"
        RECRAWL = "recrawl", "recrawl"
        SCHEDULED = "scheduled", "scheduled recrawl"
        REEXTRACT = "reextract", "re-extract"
        RETRY = "retry", "retry failed"

    class Trigger(models.TextChoices):
        ADMIN = "admin", "admin"
        API = "api", "API"
        COMMAND = "command", "command"
        SCHEDULE = "schedule", "schedule"

    ACTIVE_STATES = (State.QUEUED, State.RUNNING, State.PAUSED)

    project = models.ForeignKey("crawl.Project", on_delete=models.CASCADE, related_name="jobs")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.CRAWL)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED, db_index=True)
    trigger = models.CharField(max_length=10, choices=Trigger.choices, help_text="What started it.")
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    retry_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="retries", help_text="Failures retried."
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True, help_text="First row claimed for it.")
    finished_at = models.DateTimeField(null=True, blank=True)
    paused_at = models.DateTimeField(null=True, blank=True, help_text="When it was paused, while it is.")
    paused_seconds = models.FloatField(default=0.0, help_text="Time spent paused before its last resume.")
    message = models.TextField(blank=True, default="", help_text="Why it ended as it did.")
    stats = models.JSONField(default=dict, blank=True, help_text="Its counts, kept when it ended.")
    spider_version = models.ForeignKey(
        "scrape.SpiderVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="jobs",
        help_text="The spider code version it ran (the project's active one when it started; a deploy "
        "while it runs is written in its log).",
    )
    end_notified_at = models.DateTimeField(null=True, blank=True, help_text="When its end was announced.")

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["project", "-id"], name="job_project_recent")]

    def __str__(self) -> str:
        return f"job {self.id} ({self.kind}, {self.state})"

    @property
    def active(self) -> bool:
        return self.state in self.ACTIVE_STATES


class JobLogEntry(models.Model):
    """A warning or error logged by a task of the job, kept with it (at most
    CONSOLE_JOB_LOG_LIMIT a job), so nobody needs a shell on a worker to see why it failed."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="log")
    at = models.DateTimeField(default=timezone.now)
    level = models.CharField(max_length=10)
    logger = models.CharField(max_length=100, blank=True, default="")
    worker = models.CharField(max_length=200, blank=True, default="")
    url = models.TextField(blank=True, default="")
    code = models.CharField(max_length=40, blank=True, default="")
    message = models.TextField()

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "job log entries"

    def __str__(self) -> str:
        return f"{self.level} {self.message[:60]}"


class WorkerBeat(models.Model):
    """A Celery worker's heartbeat: its name, the queues it consumes, when it was last seen. Works on
    every broker (the embedded one has no remote control)."""

    name = models.CharField(max_length=200, unique=True)
    queues = models.CharField(max_length=300, help_text="Queues it consumes, comma-separated.")
    concurrency = models.PositiveSmallIntegerField(default=0)
    pid = models.PositiveIntegerField(default=0)
    processes = models.TextField(
        blank=True, default="", help_text="Its processes that may claim work (itself and its pool), comma-separated."
    )
    started_at = models.DateTimeField(default=timezone.now)
    seen_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.name

    def queue_list(self) -> list[str]:
        return [q for q in self.queues.split(",") if q]


class ProjectAccess(models.Model):
    """Who a project belongs to: one row per owner user or owning group. What a member may do with
    it is their role's (console/access/roles.py); superusers and holders of view_all_projects see every
    project. The permissions of the roles are declared here (console/access/policy.py checks them)."""

    project = models.ForeignKey("crawl.Project", on_delete=models.CASCADE, related_name="access")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="project_access",
        help_text="An owner. Leave empty when a group owns it.",
    )
    group = models.ForeignKey(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="project_access",
        help_text="An owning group (a team): its members see the project. Leave empty when a user owns it.",
    )

    class Meta:
        verbose_name = "project owner"
        verbose_name_plural = "project owners"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(user__isnull=False, group__isnull=True)
                | models.Q(user__isnull=True, group__isnull=False),
                name="project_access_user_xor_group",
            ),
            models.UniqueConstraint(fields=["project", "user"], name="uniq_project_access_user"),
            models.UniqueConstraint(fields=["project", "group"], name="uniq_project_access_group"),
        ]
        permissions = [
            ("view_all_projects", "Can see and steer every project, not only those it owns"),
            ("run_project", "Can start, pause, resume, cancel, retry and recrawl projects and jobs"),
            ("export_results", "Can export a project's pages, items and assets"),
            ("try_url", "Can use Try a URL on public addresses"),
            ("change_network_settings", "Can set settings that reach into networks or run code"),
        ]

    def __str__(self) -> str:
        return f"{self.project} owned by {self.user or self.group}"


from console.debug_models import DebugRun  # noqa: E402, F401
from console.health.models import Alert, HealthCounter, Monitor, NotificationTarget  # noqa: E402, F401
