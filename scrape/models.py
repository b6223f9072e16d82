"""Items: structured data extracted from a page."""

from django.db import models


class Item(models.Model):
    project = models.ForeignKey("crawl.Project", on_delete=models.CASCADE, related_name="items")
    page = models.ForeignKey("crawl.Page", on_delete=models.CASCADE, related_name="items")
    kind = models.CharField(max_length=50, default="page", help_text="Which extractor produced it.")
    data = models.JSONField(default=dict, help_text="The extracted fields.")
    errors = models.JSONField(default=list, blank=True, help_text="Validation errors, if any.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["page", "kind"], name="uniq_item_page_kind")]

    def __str__(self) -> str:
        return f"{self.kind} item of page {self.page_id}"
