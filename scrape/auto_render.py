"""A browser only where a page needs one: each link's request gets its route's render choice, and the
extract stage watches the pages of routes in auto mode (scrape/render_plan.py says what it looks for).

An auto route's pages are fetched plainly while it is `sampling`. Its first pages tell:
- a page that looks like a JavaScript shell (an empty mount point, a <noscript> asking for
  JavaScript, scripts and next to no text) decides `render` at once;
- a page with scripts is sent to the browser as a sample (up to CRAWL_RENDER_AUTO_SAMPLES of
  them), carrying what its plain fetch found: a sample that finds more links, or other watched
  fields, decides `render`;
- a page without scripts is the same in a browser: it counts as a sample that matched, unrendered.
CRAWL_RENDER_AUTO_SAMPLES matching samples make the route `static`.
Once a route renders, its pages are rendered from then on: those already fetched plainly are
fetched again in the browser, so none of what only the browser sees is missed. The decision and
its reason are a RenderRoute row (the admin shows them).
"""

import logging
from dataclasses import replace

from django.conf import settings
from django.db import transaction
from django.db.models import F, JSONField, Q, Value
from django.db.models.expressions import CombinedExpression
from django.utils import timezone

from crawl.frontier import stages
from crawl.frontier.pages import pages_requeue
from crawl.frontier.verdicts import Link
from crawl.models import Page, Project

from .models import RenderRoute
from .render_plan import (
    AUTO_KEY,
    RoutePlan,
    has_scripts,
    page_signature,
    planned_request,
    request_plan,
    sample_difference,
    shell_reason,
)
from .rules import CompiledRules, parse_html
from .spider_versions import has_spider, project_spider
from .spiders import SpiderError

log = logging.getLogger("crawlhub.extract")
SAMPLE_KEY = "render_sample"  # a sample's row carries what its plain fetch found
SAMPLING, RENDER, STATIC = RenderRoute.Decision.SAMPLING, RenderRoute.Decision.RENDER, RenderRoute.Decision.STATIC


class RenderRoutes:
    """A project's routes that set `render` (its rule sets, its spider's handlers), and its auto
    routes' decisions, read once per use."""

    def __init__(self, project: Project, rule_sets: list[CompiledRules]):
        self.project = project
        self.rules = [rules for rules in rule_sets if rules.render_plan is not None]
        self.spider = _spider_of(project)
        self._decisions: dict[str, str] | None = None

    @property
    def any(self) -> bool:
        return bool(self.rules) or self.spider is not None

    def plan(self, url: str, request: dict) -> RoutePlan | None:
        routes = [self.spider.render_plan(url, request.get("route"))] if self.spider is not None else []
        routes += [rules.render_plan for rules in self.rules if rules.applies_to(url)]
        return request_plan(request, routes)

    def decided(self, plan: RoutePlan) -> str:
        if plan.mode != "auto":
            return ""
        if self._decisions is None:
            rows = RenderRoute.objects.filter(project_id=self.project.id).values_list("route", "decision")
            self._decisions = dict(rows)
        return self._decisions.get(plan.route, SAMPLING)

    def planned(self, request: dict, plan: RoutePlan | None) -> dict:
        """The row's request for the plan (`render` only where it differs from the project's)."""
        planned = planned_request(request, plan, self.decided(plan) if plan is not None else "")
        if plan is not None and "render" not in request and planned["render"] == self.project.render_js:
            planned.pop("render")
        return planned


def _spider_of(project: Project):
    if not has_spider(project):
        return None
    try:
        spider = project_spider(project)
    except SpiderError:
        return None  # the extract stage fails its pages with the reason
    return spider if spider.sets_render else None


def links_planned(project: Project, links: list[Link], rule_sets: list[CompiledRules]) -> list[Link]:
    """Each link's request with its route's render choice (and page actions): rendered, plain, or
    auto (named by its route, rendered once the route is decided). No cost where nothing sets one."""
    if not links:
        return links
    routes = RenderRoutes(project, rule_sets)
    if not routes.any and not any(AUTO_KEY in link.request for link in links):
        return links
    planned = []
    for link in links:
        plan = routes.plan(link.url, link.request)
        planned.append(link if plan is None else replace(link, request=routes.planned(link.request, plan)))
    return planned


def auto_render_review(page: Page, result, body: bytes, rule_sets: list[CompiledRules]) -> None:
    """Watch one extracted page of an auto route (or of an `always` route fetched plainly, a seed
    say): set `result.refetch` (the request to fetch it again with, in the browser) or the request
    its row keeps (`result.changes["request"]`), and decide its route when the page tells."""
    if result.failed or result.extraction is None:
        return
    routes = RenderRoutes(page.project, rule_sets)
    plan = routes.plan(page.url, page.request) if routes.any or AUTO_KEY in page.request else None
    if plan is None or plan.mode == "never":
        return
    rendered = stages.page_renders(page.project.render_js, page.request)
    if plan.mode == "always":
        if not rendered:
            _refetch(page, result, planned_request(page.request, plan, RENDER))
        return
    if rendered:
        _sample_seen(page, result, plan, routes)
        return
    decided = routes.decided(plan)
    if decided == SAMPLING:
        _route_row(page.project, plan.route)  # before its first page is finished: see auto_render_catch_up
        decided = _look(page, result, plan, body)
    if decided == RENDER:
        _refetch(page, result, planned_request(page.request, plan, RENDER))
    elif not result.refetch:
        _keep_request(page, result, routes.planned(page.request, plan))
        result.plain_route = plan.route if decided == SAMPLING else ""


def _look(page: Page, result, plan: RoutePlan, body: bytes) -> str:
    """A plain page of a route still sampling: a shell decides it; a page with scripts may go to
    the browser as a sample. Returns the route's decision now."""
    doc = parse_html(body)
    reason = shell_reason(doc)
    if reason is not None:
        return route_decide(page.project, plan.route, RENDER, f"{reason} (plain fetch)", page.url)
    if not has_scripts(doc):  # the same in a browser: it counts as a sample that matched
        return _sample_matched(page.project, plan.route, page.url)
    if _sample_slot(page.project, plan.route):
        sample = {**page.request, SAMPLE_KEY: _signature(result)}
        _refetch(page, result, planned_request(sample, plan, RENDER))
    return SAMPLING


def _sample_seen(page: Page, result, plan: RoutePlan, routes: RenderRoutes) -> None:
    """A rendered page of an auto route: a sample is compared with its plain fetch."""
    sample = page.request.get(SAMPLE_KEY)
    if sample is None:
        return
    difference = sample_difference(sample, _signature(result))
    project, url = page.project, page.url
    if difference is not None:
        decided = route_decide(project, plan.route, RENDER, difference, url)
    else:
        decided = _sample_matched(project, plan.route, url)
    request = {k: v for k, v in page.request.items() if k != SAMPLE_KEY}
    _keep_request(page, result, planned_request(request, plan, decided))


def _signature(result) -> dict:
    items = [(item.kind, item.data) for item in result.items if item.kind != "page"]
    return page_signature([link.url for link in result.links], items)


def _refetch(page: Page, result, request: dict) -> None:
    result.refetch, page.request = request, request  # the row's publish reads it: to the render stage


def _keep_request(page: Page, result, request: dict) -> None:
    if request != page.request:
        result.changes["request"] = request


def _route_row(project: Project, route: str) -> RenderRoute:
    row, _ = RenderRoute.objects.get_or_create(project=project, route=route)
    return row


def _sample_slot(project: Project, route: str) -> bool:
    """Take one of the route's samples (CRAWL_RENDER_AUTO_SAMPLES): False when all are taken."""
    row = _route_row(project, route)
    rows = RenderRoute.objects.filter(
        id=row.id, decision=SAMPLING, samples_started__lt=settings.CRAWL_RENDER_AUTO_SAMPLES
    )
    return rows.update(samples_started=F("samples_started") + 1) == 1


def _sample_matched(project: Project, route: str, url: str) -> str:
    row = _route_row(project, route)
    RenderRoute.objects.filter(id=row.id).update(samples_matched=F("samples_matched") + 1)
    row.refresh_from_db()
    if row.decision == SAMPLING and row.samples_matched >= settings.CRAWL_RENDER_AUTO_SAMPLES:
        reason = (
            f"{row.samples_matched} of its pages were the same without a browser "
            "(no scripts, or a rendered sample that found what the plain page had)"
        )
        return route_decide(project, route, STATIC, reason, url)
    return row.decision


@transaction.atomic
def route_decide(project: Project, route: str, decision: str, reason: str, url: str) -> str:
    """Decide a route that is still sampling (the first decision stands) and return its decision.
    A route that now renders has its pages fetched plainly so far fetched again in the browser."""
    row = _route_row(project, route)
    changed = RenderRoute.objects.filter(id=row.id, decision=SAMPLING).update(
        decision=decision, reason=reason[:2000], evidence_url=url, decided_at=timezone.now()
    )
    if not changed:
        return RenderRoute.objects.get(id=row.id).decision
    log.info("project %s: route %s decided %s: %s (%s)", project.id, route, decision, reason, url)
    if decision == RENDER:
        _render_from_now_on(project, route)
    return decision


def auto_render_catch_up(project: Project, plain: list[tuple[int, str]]) -> int:
    """After a batch's pages are written: those it kept plain while their route was sampling go to
    the browser if the route was decided `render` meanwhile (by another page, another worker).
    The route's row lock orders this after that decision's commit, or that decision after this
    batch's commit (its own catch-up then finds these pages): a page is never left plain."""
    by_route: dict[str, list[int]] = {}
    for page_id, route in plain:
        by_route.setdefault(route, []).append(page_id)
    caught = 0
    for route, ids in by_route.items():
        with transaction.atomic():
            rows = RenderRoute.objects.select_for_update().filter(project=project, route=route)
            if rows.values_list("decision", flat=True).first() == RENDER:
                caught += _render_from_now_on(project, route, ids)
    return caught


def _render_from_now_on(project: Project, route: str, among: list[int] | None = None) -> int:
    """The route's pages not rendered so far are (or those `among` these ids): queued ones go to
    the render stage, finished ones are fetched again there (those being fetched or waiting for
    extraction are sent back when they are extracted)."""
    plain = Q(request__render=False) | ~Q(request__has_key="render")  # not exclude(): a missing key is NULL
    pages = Page.objects.filter(plain, project=project, **{f"request__{AUTO_KEY}": route})
    pages = pages if among is None else pages.filter(id__in=among)
    states = (Page.State.QUEUED, Page.State.DONE, Page.State.EXTRACTED)
    ids = list(pages.filter(state__in=states).values_list("id", flat=True))
    renders = CombinedExpression(F("request"), "||", Value({"render": True}, output_field=JSONField()))
    Page.objects.filter(id__in=ids).update(request=renders, etag="", last_modified="", content_sha256="")
    queued = list(Page.objects.filter(id__in=ids, state=Page.State.QUEUED).values_list("id", flat=True))
    stages.after_commit(stages.publish_fetch, queued)
    requeued = pages_requeue(Page.objects.filter(id__in=ids), from_states=(Page.State.DONE, Page.State.EXTRACTED))
    return len(queued) + len(requeued)
