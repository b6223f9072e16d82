"""A project's proxy pool: one row per proxy, with the health its answers gave it (fetch/proxy_pool.py
picks and scores them; core/proxyhealth.py holds the arithmetic)."""

from django.db import models

from core.masking import masked_url
from crawl.validators import proxy_url


class ProjectProxy(models.Model):
    project = models.ForeignKey("crawl.Project", on_delete=models.CASCADE, related_name="proxies")
    url = models.CharField(
        max_length=300,
        validators=[proxy_url],
        help_text="http://[user:password@]host:port. Its password is never shown again.",
    )
    active = models.BooleanField(default=True, help_text="Off: never used, its health kept.")
    score = models.FloatField(
        default=100.0,
        editable=False,
        help_text="Health from 0 to 100: good answers raise it, errors and blocks lower it.",
    )
    latency_ms = models.FloatField(null=True, blank=True, editable=False, help_text="Average answer time (ms).")
    uses = models.PositiveIntegerField(default=0, editable=False, help_text="Answers that came through it.")
    errors = models.PositiveIntegerField(
        default=0, editable=False, help_text="Answers it spoiled (unreachable, 502...)."
    )
    blocks = models.PositiveIntegerField(default=0, editable=False, help_text="Answers the site blocked.")
    errors_in_row = models.PositiveSmallIntegerField(default=0, editable=False)
    rests_in_row = models.PositiveSmallIntegerField(
        default=0, editable=False, help_text="Rests without a good answer between: each doubles the next."
    )
    rested_until = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="Resting (not used) until then; then tried again."
    )
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_error = models.CharField(max_length=300, blank=True, default="", editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "project proxies"
        constraints = [models.UniqueConstraint(fields=["project", "url"], name="uniq_project_proxy")]

    def __str__(self) -> str:
        return self.shown_url

    @property
    def shown_url(self) -> str:
        return masked_url(self.url)
