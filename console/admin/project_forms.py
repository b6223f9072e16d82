"""The project's change form: seeds (inline and pasted), rule sets, owners, and its secrets
(cookies, request headers, the proxy's credentials) shown masked: a value left masked keeps the
stored one, so a user allowed to change network settings replaces a secret without ever reading it."""

import json

from django import forms
from django.contrib import admin

from console.access.policy import may, projects_for
from console.admin.access import OwnerChoices
from console.masking import MASK, masked_map, masked_url, unmasked_map, unmasked_url
from console.models import ProjectAccess
from crawl.hosts.credentials import secrets_refusal
from crawl.models import Project, Seed
from crawl.services.projects import project_named_alike, seed_problem, slug_free
from scrape.models import RuleSet

# Each secret field: how it is shown, and how a submitted value gets the stored secrets back.
SECRETS = {
    "cookies": (masked_map, unmasked_map, dict),
    "request_headers": (masked_map, unmasked_map, dict),
    "proxy": (masked_url, unmasked_url, str),
}


ROBOTS_SITEMAPS_SHOWN = 10


def robots_sitemaps(project: Project) -> str:
    """The sitemap seeds robots.txt named, for the project form: how many, how many followed, the first few."""
    seeds = project.seeds.filter(from_robots=True) if project.pk else Seed.objects.none()
    count = seeds.count()
    if not count:
        return "none"
    active = seeds.filter(active=True).count()
    urls = list(seeds.order_by("id").values_list("url", flat=True)[:ROBOTS_SITEMAPS_SHOWN])
    more = f" and {count - len(urls)} more" if count > len(urls) else ""
    return f"{count} ({active} followed; switch them on through the API's seeds): {', '.join(urls)}{more}"


def seed_refusal(url: str, *, allow_private: bool) -> str | None:
    """Why a seed is refused (seed_problem), naming the "Allow private" checkbox when ticking it
    would let the seed in."""
    problem = seed_problem(url, allow_private=allow_private)
    if problem and not allow_private and seed_problem(url, allow_private=True) is None:
        return f'{problem}. Tick "Allow private" (just above the seeds) to crawl it.'
    return problem


def off_site_refusal(user, project: Project, url: str) -> str | None:
    """Why `user` may not add a seed at `url` to `project` (off the sites of a project that holds
    secrets, without the network settings permission), or None. No user: a form used outside the admin."""
    if user is None or may(user, "network"):
        return None
    return secrets_refusal(project, url)


def masked(project: Project, name: str) -> str:
    """A secret field of the project as the admin shows it read-only."""
    value = SECRETS[name][0](getattr(project, name))
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else value or "-"


class SeedForm(forms.ModelForm):
    """Seeds are checked like every URL the crawler would fetch; a refused one says why."""

    class Meta:
        model = Seed
        fields = ("url", "kind", "active", "priority", "method", "body", "headers")

    def __init__(self, *args, project: Project | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.project = project
        if "headers" in self.fields:
            self.initial["headers"] = masked_map(self.instance.headers)

    def clean_headers(self):
        headers = self.cleaned_data["headers"]
        return unmasked_map(headers, self.instance.headers) if isinstance(headers, dict) else headers

    def clean_url(self):
        url = self.cleaned_data["url"]
        # The project being edited, with the allow_private just submitted (also before its first save).
        project = self.project or (self.instance.project if self.instance.project_id else None)
        problem = seed_refusal(url, allow_private=bool(project and project.allow_private))
        if not problem and project is not None and url != self.instance.url:
            problem = off_site_refusal(getattr(self, "user", None), project, url)
        if problem:
            raise forms.ValidationError(problem)
        return url


class SeedFormSet(forms.BaseInlineFormSet):
    def get_form_kwargs(self, index):
        return {**super().get_form_kwargs(index), "project": self.instance}


class SeedInline(admin.TabularInline):
    """A seed's headers are request headers: masked, and replaced only with the network permission."""

    model = Seed
    form = SeedForm
    formset = SeedFormSet
    extra = 1
    readonly_fields = ("masked_headers", "masked_body")

    def get_queryset(self, request):
        """The seeds people entered: those robots.txt named are listed apart (robots_sitemaps), or a
        site could make the form too big to save."""
        return super().get_queryset(request).filter(from_robots=False)

    def get_formset(self, request, obj=None, **kwargs):
        form = type(self.form.__name__, (self.form,), {"user": request.user})
        return super().get_formset(request, obj, **{**kwargs, "form": form})

    def get_fields(self, request, obj=None):
        fields = [f for f in super().get_fields(request, obj) if f not in self.readonly_fields]
        if not self.has_change_permission(request, obj):  # a POST body may hold a password
            fields = ["masked_body" if f == "body" else f for f in fields]
        if may(request.user, "network") and self.has_change_permission(request, obj):
            return fields
        return ["masked_headers" if f == "headers" else f for f in fields]

    @admin.display(description="headers")
    def masked_headers(self, seed):
        return json.dumps(masked_map(seed.headers)) if seed.pk else "-"

    @admin.display(description="body")
    def masked_body(self, seed):
        return MASK if seed.body else "-"


class OwnerInline(OwnerChoices, admin.TabularInline):
    """The project's owners: its members see it (what they may do is their role's)."""

    model = ProjectAccess
    fields = ("user", "group")
    extra = 0
    verbose_name = "owner (a user or a group)"
    verbose_name_plural = "owners: the users and groups who see this project"


class RuleSetInline(admin.StackedInline):
    model = RuleSet
    extra = 0
    readonly_fields = ("version",)

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        from console.admin.scrape import spec_field_explained

        return spec_field_explained(super().formfield_for_dbfield(db_field, request, **kwargs), db_field)


class ProjectForm(forms.ModelForm):
    bulk_seeds = forms.CharField(
        required=False,
        label="Paste seeds",
        widget=forms.Textarea(attrs={"rows": 4, "cols": 90}),
        help_text="More start URLs, one per line, checked like the seeds below; seeds already there are kept.",
    )

    class Meta:
        model = Project
        fields = ("name",)  # the admin builds the form with its fieldsets' fields

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in SECRETS.keys() & self.fields.keys():
            self.initial[name] = SECRETS[name][0](getattr(self.instance, name))

    def clean_name(self):
        """One project per name up to case and punctuation among those the user sees; another
        team's names are unknown here, so they refuse nothing."""
        name = self.cleaned_data["name"]
        alike = project_named_alike(name, among=self._seen())
        if alike is not None and alike.pk != self.instance.pk:
            raise forms.ValidationError(f"The project {alike.name!r} (slug {alike.slug}) has this name: choose another")
        return name

    def clean_slug(self):
        """A slug held by a project the user sees is refused; one held by a project they do not see
        becomes the first free one after it (slug-2), so no error tells of it."""
        slug = self.cleaned_data["slug"]
        holder = Project.objects.filter(slug=slug).exclude(pk=self.instance.pk).first()
        if holder is None:
            return slug
        if self._seen().filter(pk=holder.pk).exists():
            raise forms.ValidationError(f"The project {holder.name!r} has this slug: choose another one.")
        return slug_free(slug)

    def _seen(self):
        user = getattr(self, "user", None)
        return projects_for(user) if user is not None else Project.objects.all()

    def clean(self):
        cleaned = self._unmasked(super().clean())
        urls, problems = [], []
        allow_private = bool(cleaned.get("allow_private", self.instance.allow_private))
        for number, line in enumerate((cleaned.get("bulk_seeds") or "").splitlines(), start=1):
            url = line.strip()
            if not url:
                continue
            problem = seed_refusal(url, allow_private=allow_private)
            problem = problem or off_site_refusal(getattr(self, "user", None), self.instance, url)
            if problem:
                problems.append(f"line {number}: {url}: {problem}")
            urls.append(url)
        if problems:
            self.add_error("bulk_seeds", problems)
        cleaned["pasted_seeds"] = urls
        return cleaned

    def _unmasked(self, cleaned: dict) -> dict:
        """Secrets submitted still masked get their stored values back."""
        for name in SECRETS.keys() & cleaned.keys():
            _mask, unmask, kind = SECRETS[name]
            if isinstance(cleaned[name], kind):
                cleaned[name] = unmask(cleaned[name], getattr(self.instance, name))
        return cleaned
