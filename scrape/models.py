"""Items (structured data per page), the per-project extraction rule sets and spider code versions
that produce them, and the checks a spider version must pass."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from crawl.validators import json_problem

from .rules import RuleError, compile_rules, item_kind, rules_version


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
    spider_version = models.ForeignKey(
        "scrape.SpiderVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        db_index=False,
        related_name="+",
        help_text="The deployed spider code that made it (empty: a built-in spider, rules or the page itself).",
    )
    job_id = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="The job whose extraction produced this data (a later one that finds the same data leaves it): "
        "an export of that job holds the item.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["page", "kind", "position"], name="uniq_item_page_kind_position")
        ]
        indexes = [models.Index(fields=["job_id"], name="item_job", condition=models.Q(job_id__isnull=False))]

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
        compile_rules(self.spec, name=self.name)  # never store rules that cannot run
        if problem := self.kind_problem():  # nor two rule sets whose items would overwrite each other
            raise RuleError(problem)
        self.version = rules_version(self.spec)
        super().save(*args, **kwargs)
        self._touch_project()

    def delete(self, *args, **kwargs):
        result = super().delete(*args, **kwargs)
        self._touch_project()
        return result

    @property
    def kind(self) -> str:
        """The kind of the items it makes: rule:<name>, or rule:<the spec's "name"> when it has one."""
        return item_kind(self.name, self.spec)

    def _touch_project(self) -> None:
        """Workers key their compiled rules on this stamp, so a change is seen by the next batch."""
        from crawl.models import Project

        Project.objects.filter(id=self.project_id).update(rules_changed_at=timezone.now())

    def clean(self) -> None:
        try:
            compile_rules(self.spec, name=self.name)
        except RuleError as exc:
            raise ValidationError({"spec": str(exc)}) from None
        if problem := json_problem(self.spec):
            raise ValidationError({"spec": f"cannot be stored: {problem}"})
        if problem := self.kind_problem():
            overridden = self.kind != f"rule:{self.name}"
            raise ValidationError({"spec" if overridden else "name": problem})

    def kind_problem(self) -> str | None:
        """Why its items' kind cannot be used: too long for Item.kind, or another rule set of the
        project makes items of that kind (they would overwrite each other's)."""
        kind, longest = self.kind, Item._meta.get_field("kind").max_length
        if len(kind) > longest:
            return f"the items' kind {kind!r} is longer than {longest} characters: choose a shorter name"
        if self.project_id is None:
            return None
        others = RuleSet.objects.filter(project_id=self.project_id).exclude(pk=self.pk).values_list("name", "spec")
        taken = next((name for name, spec in others if item_kind(name, spec) == kind), None)
        if taken is None:
            return None
        return (
            f"rule set {taken!r} of this project already makes items of kind {kind!r}: give this rule set "
            'another name, or another "name" in its spec (the spec\'s "name" overrides the rule set\'s own)'
        )


class HandlerLog(models.Model):
    """A line a spider's handler logged while it parsed a page, or its traceback: the page keeps
    its latest extraction's last lines (scrape/handler_log.py), replaced by the next one."""

    page = models.ForeignKey(
        "crawl.Page", on_delete=models.CASCADE, related_name="handler_log_lines", help_text="The page parsed."
    )
    at = models.DateTimeField(help_text="When the handler logged it.")
    level = models.CharField(max_length=10, help_text="DEBUG, INFO, WARNING, ERROR or CRITICAL.")
    message = models.TextField(help_text="What it logged, or the traceback of the exception it raised.")

    def __str__(self) -> str:
        return f"{self.level}: {self.message[:80]}"


class SpiderVersion(models.Model):
    """One deploy of a project's spider code: immutable. The project points at its active one
    (Project.spider_version_id); rolling back is pointing at an older one. See scrape/spider_versions.py."""

    project = models.ForeignKey("crawl.Project", on_delete=models.CASCADE, related_name="spider_versions")
    number = models.PositiveIntegerField(help_text="1, 2, 3... per project, in deploy order.")
    source = models.TextField(help_text="The Python module that defines the spider.")
    sha256 = models.CharField(max_length=64, help_text="SHA-256 of the source: workers cache the compiled class by it.")
    spider_name = models.CharField(max_length=100, blank=True, default="", help_text="The spider class's name.")
    message = models.TextField(blank=True, default="", help_text="What this version changes, as its deployer said.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "number"], name="uniq_spiderversion_project_number")]
        permissions = [("deploy_spider", "Can deploy and edit spider code (it runs in the workers)")]

    def __str__(self) -> str:
        return f"v{self.number}"

    def save(self, *args, **kwargs) -> None:
        if not self._state.adding:
            raise ValueError("a spider version is immutable: deploy a new one")
        super().save(*args, **kwargs)


class SpiderCheck(models.Model):
    """A stored response and the items a spider must make of it: `manage.py spider check` runs the
    active version (or a draft) against every check of the project, offline."""

    project = models.ForeignKey("crawl.Project", on_delete=models.CASCADE, related_name="spider_checks")
    name = models.SlugField(max_length=100, help_text="What the check is called in reports.")
    url = models.TextField(help_text="The URL the response came from.")
    status = models.PositiveSmallIntegerField(default=200, help_text="The response's HTTP status.")
    headers = models.JSONField(default=dict, blank=True, help_text="The response's headers.")
    body = models.BinaryField(help_text="The response's body, as it was received (decoded transfer).")
    request = models.JSONField(
        default=dict,
        blank=True,
        help_text="The request that fetched it (method, body, route, meta...), as a page row keeps it.",
    )
    expected_items = models.JSONField(default=list, blank=True, help_text="The items the spider must make, in order.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="uniq_spidercheck_project_name")]

    def __str__(self) -> str:
        return self.name


class RenderRoute(models.Model):
    """A route of a project in auto render mode (a rule set's, a spider handler's): whether its
    pages need a browser, and why (scrape/auto_render.py decides, from the signs its pages show)."""

    class Decision(models.TextChoices):
        SAMPLING = "sampling", "looking (plain fetches, rendered samples)"
        RENDER = "render", "rendered from now on"
        STATIC = "static", "plain fetches"

    project = models.ForeignKey("crawl.Project", on_delete=models.CASCADE, related_name="render_routes")
    route = models.CharField(max_length=120, help_text="rule:<rule set's item name> or spider:<handler>.")
    decision = models.CharField(
        max_length=10, choices=Decision.choices, default=Decision.SAMPLING, help_text="How its pages are fetched."
    )
    reason = models.TextField(blank=True, default="", help_text="Why: the sign that decided it.")
    evidence_url = models.TextField(blank=True, default="", help_text="The page that showed the sign.")
    samples_started = models.PositiveIntegerField(
        default=0, help_text="Pages of the route sent to the browser to compare with their plain fetch."
    )
    samples_matched = models.PositiveIntegerField(
        default=0, help_text="Rendered samples that found what the plain page had (enough of them: plain fetches)."
    )
    decided_at = models.DateTimeField(null=True, blank=True, help_text="When it was decided.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "route"], name="uniq_renderroute_project_route")]

    def __str__(self) -> str:
        return f"{self.route}: {self.decision}"
