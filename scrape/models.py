"""Items (structured data per page) and the per-project extraction rule sets that produce them."""

from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from .rules import RuleError, compile_rules, rules_version


class Item(models.Model):
    project = models.ForeignKey("crawl.Project", on_delete=models.CASCADE, related_name="items")
    page = models.ForeignKey("crawl.Page", on_delete=models.CASCADE, related_name="items")
    kind = models.CharField(
        max_length=80, default="page", help_text="Which extractor produced it: page, rule:<name>, api, spider."
    )
    position = models.PositiveIntegerField(
        default=0, help_text="Index of the item among the page's items of this kind."
    )
    rule_version = models.CharField(max_length=20, blank=True, default="", help_text="Version of the rules used.")
    data = models.JSONField(default=dict, help_text="The extracted fields.")
    errors = models.JSONField(default=list, blank=True, help_text="Validation errors, if any (the item is kept).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["page", "kind", "position"], name="uniq_item_page_kind_position")
        ]

    def __str__(self) -> str:
        return f"{self.kind} item {self.position} of page {self.page_id}"


class RuleSet(models.Model):
    """Declarative extraction rules (CSS/XPath fields, regexes, follow/deny, ID scraper); see scrape/rules.py."""

    project = models.ForeignKey("crawl.Project", on_delete=models.CASCADE, related_name="rule_sets")
    name = models.SlugField(max_length=80, help_text="Items it makes are of kind rule:<name>.")
    enabled = models.BooleanField(default=True)
    spec = models.JSONField(default=dict, help_text="The rules as JSON: url_patterns, item_selector, fields, ...")
    version = models.CharField(max_length=20, blank=True, default="", editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="uniq_ruleset_project_name")]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        compile_rules(self.spec)  # never store rules that cannot run
        self.version = rules_version(self.spec)
        super().save(*args, **kwargs)
        self._touch_project()

    def delete(self, *args, **kwargs):
        result = super().delete(*args, **kwargs)
        self._touch_project()
        return result

    def _touch_project(self) -> None:
        """Workers key their compiled rules on this stamp, so a change is seen by the next batch."""
        from crawl.models import Project

        Project.objects.filter(id=self.project_id).update(rules_changed_at=timezone.now())

    def clean(self) -> None:
        try:
            compile_rules(self.spec)
        except RuleError as exc:
            raise ValidationError({"spec": str(exc)}) from None
