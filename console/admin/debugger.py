"""The spider workshop's debugger page (/admin/debugger/): an editor (Ace, from django-ace) for a
draft spider beside a run panel. A run is a worker's job (console/debugger.py): this page writes the
question and shows the answer. Seeing it needs the try_url permission; running code that differs
from the active version, deploying it or keeping a check needs the spider code permission."""

import json
import zlib

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.views.decorators import staff_member_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.clickjacking import xframe_options_sameorigin

from console.access.policy import may, projects_for
from console.admin.debugger_forms import DebugForm, initial_from_query, run_initial
from console.debug_models import DebugRun
from console.debugger import debug_run_start, debug_run_wait
from console.debugger_stored import active_source
from console.masking import masked_request
from console.tryurl import MAX_MATCHES
from scrape.rules import compile_css, compile_xpath, match_texts, parse_html
from scrape.spider_request import RequestError

WAIT_SLACK_SECONDS = 10  # a page waits this much longer than the run's own limit before refreshing


@staff_member_required
def debugger_view(request):
    """GET: the editor, filled from ?url=, ?page=, ?alert=, or a run's ?run= (&step= follows one of
    its requests). POST: run, run on stored pages, deploy, keep as a check, or try a selector."""
    if not may(request.user, "try"):
        raise PermissionDenied
    if request.method == "POST":
        return _post(request)
    run = _run(request, request.GET.get("run"))
    initial = run_initial(run, step=request.GET.get("step")) if run else initial_from_query(request)
    form = DebugForm(initial=initial, user=request.user)
    return _page(request, form, run)


def _post(request):
    form = DebugForm(request.POST, user=request.user)
    action = request.POST.get("action", "run")
    if action in ("deploy", "check") and not may(request.user, "code"):
        raise PermissionDenied("deploying spider code or keeping checks needs the scrape.deploy_spider permission")
    if not form.is_valid():
        return _page(request, form, _run(request, request.POST.get("run")), status=403 if form.refused else 400)
    data, project = form.cleaned_data, form.cleaned_data["project"]
    edits = action in ("deploy", "check") or _edits_code(project, data["source"])
    if edits and not may(request.user, "code", project):
        raise PermissionDenied("editing or deploying spider code needs the scrape.deploy_spider permission")
    if action == "deploy":
        return _deploy(request, form)
    if action == "check":
        return _keep_check(request, form, _run(request, request.POST.get("run")))
    if action == "selector":
        run = _run(request, request.POST.get("run"))
        return _page(request, form, run, selector=_selector(run, data["selector"], data["selector_type"]))
    try:
        run = debug_run_start(
            project=project,
            user=request.user,
            source=data["source"],
            url=data["url"],
            request=data["request"],
            stored_pages=(data["stored_pages"] or settings.CRAWL_DEBUG_STORED_PAGES) if action == "stored" else 0,
        )
    except RequestError as exc:
        form.add_error(None, f"This request cannot be sent: {exc}")
        return _page(request, form, None, status=400)
    return redirect(f"{reverse('admin-debugger')}?run={run.id}")


RENDERED_CSP = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-ancestors 'self'"


@staff_member_required
@xframe_options_sameorigin
def rendered_view(request, run_id: int):
    """A run's response as HTML for the page's iframe: sandboxed (no scripts, an opaque origin),
    loading nothing from anywhere, framed by the console only."""
    if not may(request.user, "try"):
        raise PermissionDenied
    run = get_object_or_404(DebugRun.objects.filter(project__in=projects_for(request.user)), id=run_id)
    body = zlib.decompress(run.body) if run.body else b""
    response = HttpResponse(body, content_type="text/html; charset=utf-8")
    response["Content-Security-Policy"] = RENDERED_CSP
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _edits_code(project, source: str) -> bool:
    """Whether the run would execute code other than the project's active version."""
    return bool(source.strip()) and source.strip() != (active_source(project) or "").strip()


def _run(request, run_id) -> DebugRun | None:
    if not run_id or not str(run_id).isdigit():
        return None
    run = get_object_or_404(DebugRun.objects.filter(project__in=projects_for(request.user)), id=run_id)
    return debug_run_wait(run, seconds=settings.CRAWL_DEBUG_SECONDS + WAIT_SLACK_SECONDS)


def _deploy(request, form):
    from scrape.spider_code import SpiderCodeError
    from scrape.spider_versions import spider_version_deploy

    data = form.cleaned_data
    try:
        version = spider_version_deploy(
            project=data["project"], source=data["source"], user=request.user, message=data["message"]
        )
    except SpiderCodeError as exc:
        line = f" (line {exc.line})" if getattr(exc, "line", None) else ""
        form.add_error("source", f"Not deployed{line}: {exc}")
        return _page(request, form, _run(request, request.POST.get("run")), status=400)
    messages.success(request, f"Version {version.number} of {data['project']} deployed; it is the active version.")
    run = request.POST.get("run")
    return redirect(f"{reverse('admin-debugger')}?project={data['project'].id}" + (f"&run={run}" if run else ""))


def _keep_check(request, form, run: DebugRun | None):
    """The run's stored response and its items, kept as a check of the project's spider."""
    from scrape.spider_versions import spider_check_add

    report = run.report if run else {}
    if run is None or run.mode != DebugRun.Mode.REQUEST or "items" not in report:
        form.add_error(None, "Run the draft on a request first: a check keeps that response and its items.")
        return _page(request, form, run, status=400)
    data = form.cleaned_data
    spider_check_add(
        project=run.project,
        name=data["check_name"] or report["url"][:100],
        url=report["url"],
        status=report.get("status") or 200,
        headers=report.get("headers", {}),
        body=zlib.decompress(run.body),
        request=report.get("request", {}),
        expected_items=report["items"],
        user=request.user,
    )
    messages.success(request, f"Kept {report['url']} with its {len(report['items'])} items as a check.")
    return redirect(f"{reverse('admin-debugger')}?run={run.id}")


def _selector(run: DebugRun | None, selector: str, kind: str) -> dict:
    """What a CSS selector or XPath finds in the run's response (parsed as rule sets parse it)."""
    report = {"selector": selector, "kind": kind, "count": 0, "matches": [], "error": ""}
    body = zlib.decompress(run.body) if run is not None and run.body else b""
    if not selector or not body:
        return report | {"error": "run a request first, then try a selector on its response"}
    try:
        compiled = compile_css("selector", selector) if kind == "css" else compile_xpath("selector", selector)
        found = compiled(parse_html(body))
    except Exception as exc:  # RuleError, or an XPath that fails only on a real page
        return report | {"error": str(exc)}
    found = found if isinstance(found, list) else [found]
    return report | {"count": len(found), "matches": match_texts(found[:MAX_MATCHES], "text")}


def _page(request, form, run: DebugRun | None, *, selector: dict | None = None, status: int = 200):
    context = {
        **admin.site.each_context(request),
        "title": "Spider debugger",
        "form": form,
        "run": run,
        "report": run.report if run and run.finished else None,
        "selector": selector,
        "may_edit": may(request.user, "code"),
    }
    if context["report"]:
        context |= _report_context(context["report"])
    return render(request, "admin/debugger.html", context, status=status)


def _report_context(report: dict) -> dict:
    items = report.get("items") or []
    columns = list(dict.fromkeys(k for item in items if isinstance(item, dict) for k in item))
    rows = [[_cell(item.get(c)) if isinstance(item, dict) else "" for c in columns] for item in items]
    return {
        "item_columns": columns,
        "item_rows": rows,
        "headers": sorted((report.get("headers") or {}).items()),
        "request_json": json.dumps(masked_request(report.get("request")), indent=1),
    }


def _cell(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
