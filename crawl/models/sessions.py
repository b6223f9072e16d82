"""A project's pool of cookie sessions (Crawlee's SessionPool idea): each session keeps its own
cookies (SessionCookie rows), logs in on its own, and is retired when a site blocks it or logs it out."""

from django.db import models
from django.db.models import Q


class CookieSession(models.Model):
    """One session of a project's pool: its place (`slot`) while it is live, its counters, and why
    it was retired. Its cookies are the SessionCookie rows that name it."""

    class State(models.TextChoices):
        LOGGING_IN = "logging_in", "logging in"
        READY = "ready", "ready"
        RETIRED = "retired", "retired"

    project = models.ForeignKey("crawl.Project", on_delete=models.CASCADE, related_name="cookie_sessions")
    slot = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Its place in the pool (0 to the pool's size - 1); empty once retired."
    )
    state = models.CharField(max_length=12, choices=State.choices, default=State.READY)
    host = models.CharField(
        max_length=255,
        blank=True,
        default="",
        help_text="The host it serves (session_per_host: a pool per host); empty: any.",
    )
    uses = models.PositiveIntegerField(default=0, help_text="Requests answered with it.")
    errors = models.PositiveIntegerField(default=0, help_text="Answers that were errors (network, 5xx).")
    created_at = models.DateTimeField(auto_now_add=True)
    ready_at = models.DateTimeField(null=True, blank=True, help_text="When its login was done.")
    last_used_at = models.DateTimeField(null=True, blank=True)
    retired_at = models.DateTimeField(null=True, blank=True)
    retired_reason = models.CharField(max_length=200, blank=True, default="", help_text="Why it was retired.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "host", "slot"], name="uniq_live_session_slot")]
        indexes = [models.Index(fields=["project"], name="live_session", condition=Q(slot__isnull=False))]

    def __str__(self) -> str:
        return f"session {self.id} ({self.get_state_display()})"
