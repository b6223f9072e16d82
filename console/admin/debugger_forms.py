"""The debugger page's form and where it is filled from: a query (?url=, ?project=, ?page=, ?alert=)
or an earlier run (?run=, and &step= to follow one of its requests)."""

import json

from django import forms
from django.conf import settings
from django_ace import AceWidget

from console.access.policy import may, projects_for, scoped
from console.debug_models import DebugRun
from console.debugger_stored import active_source
from console.health.models import Alert
from core.masking import MASK, masked_map, masked_url, unmasked_map, unmasked_url
from crawl.models import Page, Project
from scrape.spider_request import METHODS

SKELETON = """from scrape.spiders import Request, Spider, route


class DraftSpider(Spider):
    name = "draft"

    def default(self, response):
        self.log.info("parsing %s", response.url)
        yield {"url": response.url, "title": response.xpath("string(//title)")}
"""
SELECTOR_KINDS = [("css", "CSS"), ("xpath", "XPath")]
RENDER_CHOICES = [("", "as the project does"), ("on", "in headless Chromium"), ("off", "plain fetch")]
RENDER_OF = {"": None, "on": True, "off": False}


def _json_field(help_text: str) -> forms.CharField:
    return forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2, "cols": 50}), help_text=help_text)


class DebugForm(forms.Form):
    project = forms.ModelChoiceField(Project.objects.none(), help_text="Its egress, scope and robots.txt.")
    url = forms.CharField(max_length=2000, required=False)
    method = forms.ChoiceField(choices=[(m, m) for m in sorted(METHODS)], initial="GET")
    headers = _json_field('JSON object, e.g. {"Accept": "application/json"}')
    body = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2, "cols": 50}))
    route = forms.CharField(max_length=100, required=False, help_text="The handler that parses the answer.")
    meta = _json_field("JSON object the handler reads as response.meta")
    proxy = forms.CharField(
        max_length=2000, required=False, help_text="http:// proxy of this request (private only where allowed)."
    )
    render = forms.ChoiceField(choices=RENDER_CHOICES, required=False)
    timeout = forms.FloatField(min_value=0.1, max_value=300, required=False, help_text="Seconds for the answer.")
    source = forms.CharField(
        required=False,
        strip=False,
        widget=AceWidget(
            mode="python",
            width="100%",
            height="520px",
            useworker=False,
            showprintmargin=False,
            toolbar=False,
            tabsize=4,
        ),
    )
    stored_pages = forms.IntegerField(
        min_value=1, max_value=500, required=False, initial=settings.CRAWL_DEBUG_STORED_PAGES, help_text="How many."
    )
    message = forms.CharField(max_length=500, required=False, help_text="What this version changes (deploy).")
    check_name = forms.CharField(max_length=100, required=False, help_text="Name of the check (default: the URL).")
    selector = forms.CharField(max_length=1000, required=False)
    selector_type = forms.TypedChoiceField(choices=SELECTOR_KINDS, required=False, empty_value="css")
    # The stored request the form was filled from ("page:<id>", "run:<id>" or "run:<id>:<step>"): its
    # secrets are shown masked, and a value sent back still masked keeps the stored one.
    replay_of = forms.CharField(max_length=60, required=False, widget=forms.HiddenInput)

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user, self.refused = user, False
        self.fields["project"].queryset = projects_for(user)

    def clean(self):
        """The request as a row keeps it; a project that allows private addresses needs the network
        settings permission, as Try a URL does."""
        cleaned = super().clean()
        project = cleaned.get("project")
        if project is not None and project.allow_private and not may(self.user, "network"):
            self.refused = True
            raise forms.ValidationError(
                "This project allows private addresses: debugging it needs the console.change_network_settings "
                "permission."
            )
        if self.data.get("action", "run") == "run" and not cleaned.get("url"):
            self.add_error("url", "Give the URL to fetch.")
        stored = replayed_request(self.user, cleaned.get("replay_of") or "")
        body = cleaned.get("body") or None
        cleaned["request"] = {
            "method": cleaned.get("method") or "GET",
            "headers": unmasked_map(self._object("headers"), stored.get("headers")),
            "body": stored.get("body") if body == MASK else body,
            "route": cleaned.get("route") or None,
            "meta": self._object("meta"),
            "proxy": unmasked_url((cleaned.get("proxy") or "").strip(), stored.get("proxy") or ""),
            "render": RENDER_OF.get(cleaned.get("render") or ""),
            "timeout": cleaned.get("timeout"),
        }
        return cleaned

    def _object(self, name: str) -> dict:
        text = (self.cleaned_data.get(name) or "").strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except ValueError as exc:
            self.add_error(name, f"not JSON: {exc}")
            return {}
        if not isinstance(value, dict):
            self.add_error(name, "must be a JSON object")
            return {}
        return value


def _request_fields(url: str, request: dict, replay_of: str) -> dict:
    """Form fields of a URL and a stored request (Page.request's keys), its secrets masked as on
    every other surface (header values, the body, the proxy's credentials): `replay_of` names the
    stored request, whose values a field sent back still masked keeps."""
    return {
        "url": url,
        "replay_of": replay_of,
        "method": request.get("method", "GET"),
        "headers": json.dumps(masked_map(request["headers"])) if request.get("headers") else "",
        "body": MASK if request.get("body") else "",
        "route": request.get("route") or "",
        "meta": json.dumps(request["meta"]) if request.get("meta") else "",
        "proxy": masked_url(request["proxy"]) if request.get("proxy") else "",
        "render": {True: "on", False: "off"}.get(request.get("render"), ""),
        "timeout": request.get("timeout"),
    }


def initial_from_query(request) -> dict:
    """?page=<id> (a failed page, a page with a spider error), ?alert=<id> (a template change: its
    first sample page), else ?url= and ?project= (an id or a slug)."""
    query, user = request.GET, request.user
    page = _page_of(user, query.get("page")) or _alert_sample(user, query.get("alert"))
    if page is not None:
        fields = _request_fields(page.url, page.request or {}, f"page:{page.id}")
        return {"project": page.project, "source": _source(page.project), **fields}
    project = _project_of(user, query.get("project", ""))
    return {"project": project, "url": query.get("url", ""), "source": _source(project)}


def run_initial(run: DebugRun, *, step: str | None) -> dict:
    """The form as the run was asked; `step`: the index of one of its follow-up requests, to step into."""
    requests = (run.report or {}).get("requests") or []
    if step is not None and step.isdigit() and int(step) < len(requests):
        chosen = requests[int(step)]
        asked = _request_fields(chosen["url"], chosen.get("request") or {}, f"run:{run.id}:{step}")
    else:
        asked = _request_fields(run.request.get("url", ""), run.request, f"run:{run.id}")
    return {
        "project": run.project,
        "source": run.source,
        "stored_pages": run.stored_pages or settings.CRAWL_DEBUG_STORED_PAGES,
        **asked,
    }


def replayed_request(user, replay_of: str) -> dict:
    """The stored request `replay_of` names ("page:<id>", "run:<id>", "run:<id>:<step>"), of a
    project the user sees; {} when it names nothing they may read."""
    kind, _, rest = replay_of.partition(":")
    ident, _, step = rest.partition(":")
    if not ident.isascii() or not ident.isdigit():
        return {}
    if kind == "page":
        page = _page_of(user, ident)
        return (page.request or {}) if page is not None else {}
    run = scoped(DebugRun.objects.all(), user).filter(id=ident).first() if kind == "run" else None
    if run is None:
        return {}
    if not step:
        return run.request or {}
    requests = (run.report or {}).get("requests") or []
    index = int(step) if step.isascii() and step.isdigit() else len(requests)
    return (requests[index].get("request") or {}) if index < len(requests) else {}


def _source(project) -> str:
    return (active_source(project) if project is not None else None) or SKELETON


def _page_of(user, page_id) -> Page | None:
    if not page_id or not str(page_id).isdigit():
        return None
    return scoped(Page.objects.select_related("project"), user).filter(id=page_id).first()


def _alert_sample(user, alert_id) -> Page | None:
    if not alert_id or not str(alert_id).isdigit():
        return None
    alert = scoped(Alert.objects.all(), user).filter(id=alert_id).first()
    samples = (alert.evidence or {}).get("sample_pages", []) if alert else []
    return _page_of(user, samples[0]) if samples else None


def _project_of(user, value: str):
    projects = projects_for(user)
    return (projects.filter(id=value) if value.isdigit() else projects.filter(slug=value)).first() if value else None
