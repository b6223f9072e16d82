"""Spider code as versioned project data: deploy, activate (rollback is activating an older
version), and the spider a project's pages are parsed with.

A deploy compiles the source and runs the project's checks before it saves anything; a refused
deploy saves nothing. Activating a version points the project at it (Project.spider_version_id) and
moves the project's rules stamp, so each worker's next batch reads the new pointer with the page's
project row (no extra query) and compiles the version once, by its hash.
"""

import logging

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.dispatch import Signal
from django.utils import timezone

from crawl.models import Project

from .models import SpiderVersion
from .spider_code import SpiderCodeError, compile_spider, source_sha256, spider_class_for
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
    spider_cls = compile_spider(source, filename="<deploy>")
    active = spider_version_active(project)
    sha256 = source_sha256(source)
    if active is not None and active.sha256 == sha256:
        return active
    if not force:
        _checks_pass(project, spider_cls)
    with transaction.atomic():
        Project.objects.select_for_update().filter(id=project.id).first()  # one deploy of a project at a time
        number = (SpiderVersion.objects.filter(project=project).aggregate(n=Max("number"))["n"] or 0) + 1
        version = SpiderVersion.objects.create(
            project=project,
            number=number,
            source=source,
            sha256=sha256,
            spider_name=str(spider_cls.name or spider_cls.__qualname__)[:100],
            message=message,
            created_by=user if user is not None and user.is_authenticated else None,
        )
        spider_version_activate(project=project, version=version)
    log.info("project %s: spider version %s deployed", project.slug, number)
    return version


def _checks_pass(project: Project, spider_cls: type[Spider]) -> None:
    from .spider_checks import check_failures, spider_checks_run

    failures = check_failures(spider_checks_run(project=project, spider=spider_cls()))
    if failures:
        raise DeployRefused(f"{len(failures)} check(s) fail: " + "; ".join(failures), differences=failures)


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
        sha256, source = _version_source(project.spider_version_id)
        return spider_class_for(sha256, source)()
    _load_builtins()
    return get_spider(project.spider)


def _version_source(version_id: int) -> tuple[str, str]:
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
