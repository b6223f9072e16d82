"""Spider code as versioned project data: deploy, activate (rollback is activating an older
version), and the spider a project's pages are parsed with.

A deploy compiles the source and runs the project's checks before it saves anything, in the
sandbox's child process (scrape/sandbox.py: no database, broker or secret, a time and a memory
limit), never in the process that deploys (the web process, for the API and the admin); a refused
deploy saves nothing. Activating a version points the project at it (Project.spider_version_id) and
moves the project's rules stamp, so each worker's next batch reads the new pointer with the page's
project row (no extra query) and compiles the version once, by its hash.
"""

import base64
import logging

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.dispatch import Signal
from django.utils import timezone

from crawl.models import Project

from .models import SpiderCheck, SpiderVersion
from .sandbox import Limits, SandboxStopped, sandbox_run
from .spider_checks import CheckResult, as_json, check_run
from .spider_code import SpiderCodeError, source_sha256, spider_class_for
from .spiders import Spider, get_spider, load_spider_modules

log = logging.getLogger("crawlhub.spiders")
_VERSIONS: dict[int, tuple[str, str]] = {}  # version id -> (sha256, source), per process: versions are immutable
_BUILTINS_LOADED = False
# Sent after the commit that points a project at a version (`project`, `version`): the console
# writes it in the project's running job's log.
spider_version_activated = Signal()


class DeployRefused(SpiderCodeError):
    """A deploy refused although its code compiles: its checks fail (deploy with force to override)."""

    def __init__(self, message: str, *, line: int | None = None, differences: list[str] | None = None):
        super().__init__(message, line=line)
        self.differences = differences or []


def spider_version_deploy(
    *, project: Project, source: str, user=None, message: str = "", force: bool = False
) -> SpiderVersion:
    """Store `source` as the project's next version and make it the active one. Refused, saving
    nothing, with SpiderCodeError (line and reason) when it does not compile, defines no spider or
    names a missing route, and with DeployRefused when the project's checks fail, unless `force`.
    The same source as the active version deploys nothing: the active version is returned."""
    active = spider_version_active(project)
    if active is not None and active.sha256 == source_sha256(source):
        return active
    spider_name = spider_version_vet(project=project, source=source, force=force)
    return _version_store(project, source, spider_name, user, message)


def sandbox_limits() -> Limits:
    """The limits user code runs under in the sandbox: the debugger's (CRAWL_DEBUG_*)."""
    return Limits(seconds=settings.CRAWL_DEBUG_SECONDS, memory_mb=settings.CRAWL_DEBUG_MEMORY_MB)


def spider_version_vet(*, project: Project, source: str, force: bool = False) -> str:
    """What a deploy checks before it saves (forms call it to show the refusal beside the code),
    run in the sandbox's child: the spider's name, or SpiderCodeError (also for code stopped at
    the sandbox's limits) / DeployRefused."""
    checks = [] if force else [_check_job(c) for c in SpiderCheck.objects.filter(project=project).order_by("name")]
    try:
        answer = sandbox_run({"entry": "vet", "source": source, "checks": checks}, limits=sandbox_limits())
    except SandboxStopped as exc:
        raise SpiderCodeError(f"refused: importing the module was {exc}") from None
    if "error" in answer:
        raise SpiderCodeError(answer["error"]["message"], line=answer["error"]["line"])
    failures = answer["failures"]
    if failures:
        raise DeployRefused(f"{len(failures)} check(s) fail: " + "; ".join(failures), differences=failures)
    return answer["spider_name"]


def _check_job(check: SpiderCheck) -> dict:
    fields = _check_fields(check)
    body = base64.b64encode(fields.pop("body")).decode()
    return fields | {"body_b64": body}


def _version_store(project: Project, source: str, spider_name: str, user, message: str) -> SpiderVersion:
    sha256 = source_sha256(source)
    with transaction.atomic():
        Project.objects.select_for_update().filter(id=project.id).first()  # one deploy of a project at a time
        number = (SpiderVersion.objects.filter(project=project).aggregate(n=Max("number"))["n"] or 0) + 1
        version = SpiderVersion.objects.create(
            project=project,
            number=number,
            source=source,
            sha256=sha256,
            spider_name=spider_name[:100],
            message=message,
            created_by=user if user is not None and user.is_authenticated else None,
        )
        spider_version_activate(project=project, version=version)
    log.info("project %s: spider version %s deployed", project.slug, number)
    return version


@transaction.atomic
def spider_version_activate(*, project: Project, version: SpiderVersion) -> None:
    """Point the project at `version` (an older one: a rollback). Workers see it at their next
    batch; the rules stamp moves too, so a recrawl of unchanged bytes is extracted again."""
    if version.project_id != project.id:
        raise ValueError(f"version {version.id} is not one of project {project.slug}'s")
    now = timezone.now()
    Project.objects.filter(id=project.id).update(spider_version_id=version.id, rules_changed_at=now)
    project.spider_version_id, project.rules_changed_at = version.id, now
    transaction.on_commit(lambda: spider_version_activated.send(sender=Project, project=project, version=version))


def spider_version_active(project: Project) -> SpiderVersion | None:
    """The version the project runs, None when it runs its built-in spider (or none)."""
    if project.spider_version_id is None:
        return None
    return SpiderVersion.objects.filter(id=project.spider_version_id, project_id=project.id).first()


def has_spider(project: Project) -> bool:
    """Whether the project's pages are parsed by a Python spider (a deployed version or a built-in one)."""
    return bool(project.spider_version_id or project.spider)


def project_spider(project: Project) -> Spider:
    """A new instance of the spider that parses the project's pages: its active version (compiled
    once per process, by hash), else the built-in one named by Project.spider. Raises SpiderError
    (SpiderCodeError for a version that no longer compiles here)."""
    if project.spider_version_id is not None:
        sha256, source = version_source(project.spider_version_id)
        return spider_class_for(sha256, source)()
    _load_builtins()
    return get_spider(project.spider)


def version_source(version_id: int) -> tuple[str, str]:
    """One query per version and process: a version never changes."""
    found = _VERSIONS.get(version_id)
    if found is None:
        row = SpiderVersion.objects.filter(id=version_id).values_list("sha256", "source").first()
        if row is None:
            raise SpiderCodeError(f"spider version {version_id} does not exist")
        found = _VERSIONS[version_id] = (row[0], row[1])
    return found


def _load_builtins() -> None:
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        load_spider_modules(settings.CRAWL_SPIDER_MODULES)
        _BUILTINS_LOADED = True


def spider_check_add(
    *,
    project: Project,
    name: str,
    url: str,
    status: int,
    headers: dict,
    body: bytes | str,
    request: dict,
    expected_items: list[dict],
    user=None,
) -> SpiderCheck:
    """Keep a response and the items expected of it as a check of the project (a check of that
    name is replaced)."""
    check, _ = SpiderCheck.objects.update_or_create(
        project=project,
        name=name,
        defaults={
            "url": url,
            "status": status,
            "headers": dict(headers or {}),
            "body": body.encode() if isinstance(body, str) else bytes(body),
            "request": dict(request or {}),
            "expected_items": as_json(list(expected_items)),
            "created_by": user if user is not None and user.is_authenticated else None,
        },
    )
    return check


def spider_checks_run(*, project: Project, spider: Spider) -> list[CheckResult]:
    """Run `spider` on every check of the project, in name order."""
    return [check_run(spider, _check_fields(c)) for c in SpiderCheck.objects.filter(project=project).order_by("name")]


def check_to_file(check: SpiderCheck) -> dict:
    """A check as its JSON file holds it (the body as text)."""
    return {
        "name": check.name,
        "url": check.url,
        "status": check.status,
        "headers": check.headers,
        "request": check.request,
        "body": bytes(check.body).decode("utf-8", "replace"),
        "expected_items": check.expected_items,
    }


def _check_fields(check: SpiderCheck) -> dict:
    return {
        "name": check.name,
        "url": check.url,
        "status": check.status,
        "headers": check.headers,
        "body": bytes(check.body),
        "request": check.request,
        "expected_items": check.expected_items,
    }
