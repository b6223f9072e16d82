"""The evidence of blocked answers: per project and host, the latest one (its rule and the start of
its body), for the "host blocked" monitor and the dashboard. The counts are the health counters'."""

from django.db import models
from django.utils import timezone


class HostBlock(models.Model):
    """The latest answer of a host that a block rule matched (core/blocks.py), for one project."""

    project = models.ForeignKey("crawl.Project", on_delete=models.CASCADE, related_name="host_blocks")
    host = models.CharField(max_length=255)
    url = models.TextField(help_text="The URL that was answered with the block page.")
    rule = models.CharField(max_length=200, help_text="The block rule that matched.")
    reason = models.TextField(blank=True, default="", help_text="What matched, in words.")
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    sample = models.TextField(blank=True, default="", help_text="The start of the body (secrets masked).")
    seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "host"], name="uniq_host_block")]

    def __str__(self) -> str:
        return f"{self.host}: {self.rule}"
