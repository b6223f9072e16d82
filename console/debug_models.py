"""The spider debugger's runs (imported by console.models): what was asked, and what the worker that
ran it answered. The web process writes the question; a worker task (console.debug_run) runs the
code and writes the answer; the page reads it."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class DebugRun(models.Model):
    """One run of the debugger: a draft spider's source on one request, or on the project's last
    stored responses, run in a worker under a time and memory limit."""

    class Mode(models.TextChoices):
        REQUEST = "request", "one request"
        STORED = "stored", "stored pages"

    class State(models.TextChoices):
        QUEUED = "queued", "waiting for a worker"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"

    project = models.ForeignKey("crawl.Project", on_delete=models.CASCADE, related_name="debug_runs")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.REQUEST)
    source = models.TextField(blank=True, default="", help_text="The draft spider's source (empty: no spider code).")
    request = models.JSONField(default=dict, blank=True, help_text="url, method, headers, body, route, meta.")
    stored_pages = models.PositiveIntegerField(default=0, help_text="Stored mode: how many of the last pages.")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    report = models.JSONField(default=dict, blank=True, help_text="What the run found.")
    body = models.BinaryField(default=b"", blank=True, help_text="zlib-compressed response body (request mode).")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"debug run {self.id} ({self.get_mode_display()}, {self.get_state_display()})"

    @property
    def finished(self) -> bool:
        return self.state in (self.State.DONE, self.State.FAILED)
