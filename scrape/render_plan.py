"""Where a page needs a browser: the one `render` setting of rule sets, spider routes and requests
(never, always, auto), what a page's request row says about it, and the signs of a JavaScript shell.

Pure: no Django, no network. A page's row carries the choice made for it (Page.request):
`render` (true: the render queue), `render_auto` (the route whose auto mode chose, e.g.
"rule:category" or "spider:product") and `actions` (core.net.page_actions). An auto route fetches
its pages plainly until a sign says it needs a browser (scrape/auto_render.py keeps the decision).
"""

import hashlib
import json
import re
from dataclasses import dataclass

from core.net.page_actions import ActionError, actions_checked

MODES = ("never", "always", "auto")
STRENGTH = {"never": 0, "auto": 1, "always": 2}  # of two routes that apply, the one that renders more wins
AUTO_KEY = "render_auto"
MOUNT_IDS = frozenset({"root", "app", "__next", "__nuxt", "___gatsby", "svelte", "react-root", "main-app"})
MOUNT_ATTRS = ("data-reactroot", "ng-app", "ng-version", "data-server-rendered", "data-v-app")
NOSCRIPT_ASKS = re.compile(
    r"(enable|turn on|activate|requires?|need|allow)\W+(\w+\W+){0,3}?javascript"
    r"|javascript\W+(\w+\W+){0,3}?(required|disabled|enabled|needed|is off|turned off)",
    re.IGNORECASE,
)
SHELL_TEXT_CHARS = 200  # a body with less visible text than this, beside scripts, is a shell
VISIBLE_TEXT = "//body//text()[not(ancestor::script or ancestor::style or ancestor::noscript or ancestor::template)]"


class RenderSettingError(ValueError):
    """A render setting or page actions that cannot be used: the message says why."""


def render_mode(value) -> str | None:
    """never, always or auto (True is always, False never), or None: not set here."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return "always" if value else "never"
    if value not in MODES:
        raise RenderSettingError(f"render must be one of {', '.join(MODES)} (or true/false), not {value!r}")
    return value


def checked_actions(actions) -> tuple[dict, ...]:
    try:
        return tuple(actions_checked(actions))
    except ActionError as exc:
        raise RenderSettingError(str(exc)) from None


@dataclass(frozen=True)
class RoutePlan:
    """What one route (a rule set, a spider handler) asks: its mode (None: only actions, for when
    something else renders its pages), its key, its page actions."""

    mode: str | None
    route: str
    actions: tuple = ()


def strongest(plans: list[RoutePlan | None]) -> RoutePlan | None:
    """Of the routes that apply to a page and set `render`, the one that renders most (the first
    of equals): a page one of them needs rendered is rendered."""
    chosen = None
    for plan in plans:
        if (
            plan is not None
            and plan.mode is not None
            and (chosen is None or STRENGTH[plan.mode] > STRENGTH[chosen.mode])
        ):
            chosen = plan
    return chosen


def request_plan(request: dict, routes: list[RoutePlan | None]) -> RoutePlan | None:
    """The plan of a page whose row (or link) carries `request`: its own render choice wins (a
    spider's Request(render=True/False)); Request(render="auto") takes its route's key; else the
    strongest route that sets one; None: the project's render_js decides."""
    route = strongest(routes)
    if AUTO_KEY in request:
        key = request[AUTO_KEY] or (route.route if route is not None else "request")
        return RoutePlan("auto", key, route.actions if route is not None else ())
    if "render" in request:
        return None
    return route


def planned_request(request: dict, plan: RoutePlan | None, decided: str) -> dict:
    """The row's request for a plan: `decided` is the auto route's decision ("render", "static" or
    "" while it samples). A request's own actions win over its route's."""
    if plan is None:
        return request
    renders = plan.mode == "always" or (plan.mode == "auto" and decided == "render")
    planned = {**request, "render": renders}
    if plan.mode == "auto":
        planned[AUTO_KEY] = plan.route
    if plan.actions and plan.mode != "never" and "actions" not in request:
        planned["actions"] = list(plan.actions)
    return planned


def shell_reason(doc) -> str | None:
    """Why a plainly fetched page (lxml document) looks like a JavaScript shell, or None: a
    <noscript> that asks for JavaScript, an empty mount point of a script framework, or a body with
    scripts and next to no visible text."""
    if not doc.xpath("//script"):
        return None
    for noscript in doc.xpath("//noscript"):
        text = " ".join(noscript.itertext())
        if NOSCRIPT_ASKS.search(text):
            return f"a <noscript> asks for JavaScript: {' '.join(text.split())[:120]!r}"
    for element in doc.iter():
        if isinstance(element.tag, str) and _is_mount(element) and _is_empty(element):
            name = element.get("id") or next(a for a in MOUNT_ATTRS if a in element.attrib)
            return f"its mount point <{element.tag} {name}> is empty"
    text = _visible_text(doc)
    if len(text) < SHELL_TEXT_CHARS:
        return f"scripts and only {len(text)} characters of visible text"
    return None


def has_scripts(doc) -> bool:
    """A page without any script is the same in a browser: it is never sampled."""
    return bool(doc.xpath("//script"))


def _is_mount(element) -> bool:
    return element.get("id") in MOUNT_IDS or any(a in element.attrib for a in MOUNT_ATTRS)


def _is_empty(element) -> bool:
    return len(element) == 0 and not (element.text or "").strip()


def _visible_text(doc) -> str:
    texts = doc.xpath(VISIBLE_TEXT)
    return " ".join(" ".join(str(t) for t in texts).split())


def page_signature(links: list[str], items: list[tuple[str, dict]]) -> dict:
    """What a sample compares: the page's links (short hashes) and a digest of its watched fields
    (the items of its rule sets and spider, not the page's own text)."""
    hashes = sorted({hashlib.sha256(url.encode()).hexdigest()[:10] for url in links})
    encoded = json.dumps(sorted(json.dumps(item, sort_keys=True, default=str) for item in items))
    return {"links": hashes, "items": hashlib.sha256(encoded.encode()).hexdigest()[:16]}


def sample_difference(static: dict, rendered: dict) -> str | None:
    """Why a rendered sample says its route needs a browser, or None: the sample found links the
    plain page lacks, or its watched fields differ."""
    new = set(rendered.get("links", [])) - set(static.get("links", []))
    if new:
        return (
            f"a rendered sample found {len(new)} links the plain page lacks "
            f"({len(rendered['links'])} links against {len(static.get('links', []))})"
        )
    if rendered.get("items") != static.get("items"):
        return "a rendered sample's watched fields differ from the plain page's"
    return None
