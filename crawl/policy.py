"""Project policy the stages share: identity (user agent), reach (private addresses, scope), limits,
the rules' stamp and media rules. The fetch, extract and download stages and the console read them here."""

from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.utils import timezone

from core.canonical import Scope, host_of, parse_lines
from core.mediarules import MediaRules
from core.net.client import FetchLimits
from crawl.models import Project

T = TypeVar("T")


def fetch_limits() -> FetchLimits:
    return FetchLimits(
        connect_timeout=settings.CRAWL_CONNECT_TIMEOUT,
        read_timeout=settings.CRAWL_READ_TIMEOUT,
        total_timeout=settings.CRAWL_TOTAL_TIMEOUT,
        max_bytes=settings.CRAWL_MAX_BODY_BYTES,
    )


def user_agent_of(project: Project) -> str:
    return project.user_agent or settings.CRAWL_DEFAULT_USER_AGENT


def allows_private(project: Project) -> bool:
    return project.allow_private or settings.CRAWL_ALLOW_PRIVATE


def rules_stamp(project: Project) -> str:
    """What a page was extracted with (pyspider's itag): a change of the rules makes it due again."""
    return project.rules_changed_at.isoformat() if project.rules_changed_at else ""


# One per-process cache of what is derived from a project's configuration, keyed by its change stamp
# (its settings and seeds: config_changed_at; its rule sets: rules_changed_at). A stage reads each
# project's row at every claim, so an edit in the admin, the API or a command takes effect at every
# worker's next batch, whatever the field.
_SNAPSHOTS: dict[tuple[int, str], tuple[tuple, object]] = {}


def project_snapshot(project: Project, name: str, build: Callable[[Project], T]) -> T:
    """`build(project)`, computed once per change of the project's configuration in this process."""
    if project.id is None:  # an unsaved project (the try-URL debugger's ad-hoc trial): nothing to keep
        return build(project)
    stamp = (project.config_changed_at, project.rules_changed_at)
    cached = _SNAPSHOTS.get((project.id, name))
    if cached is not None and cached[0] == stamp:
        return cached[1]
    value = build(project)
    _SNAPSHOTS[(project.id, name)] = (stamp, value)
    return value


def project_config_changed(project: Project) -> None:
    """Move the project's change stamp (its row and this copy) after a change its save did not make:
    seeds added in bulk."""
    project.config_changed_at = config_stamp_move(project.id)


def config_stamp_move(project_id: int):
    """Move the change stamp of the project's row (a seed saved or deleted); returns the new one."""
    now = timezone.now()
    Project.objects.filter(id=project_id).update(config_changed_at=now)
    return now


def project_media_rules(project: Project) -> MediaRules:
    """The project's media rules."""
    return project_snapshot(project, "media_rules", _media_rules)


def _media_rules(project: Project) -> MediaRules:
    return MediaRules.build(
        kinds=project.media_kinds.split(","),
        extensions=parse_lines(project.media_extensions),
        mime_types=parse_lines(project.media_mime_types),
        page_patterns=parse_lines(project.media_page_patterns),
        gallery_patterns=parse_lines(project.gallery_page_patterns),
        max_bytes=project.media_max_bytes or settings.CRAWL_MAX_MEDIA_BYTES,
        any_host=project.media_any_host,
    )


def project_scope(project: Project) -> Scope:
    """The project's scope; domains default to the hosts of its seeds."""
    return project_snapshot(project, "scope", _scope)


def _scope(project: Project) -> Scope:
    named = parse_lines(project.allowed_domains)
    seeds = [] if named else list(project.seeds.values_list("url", flat=True))
    return Scope.build(
        domains=named or sorted({host_of(u) for u in seeds} - {""}),
        max_depth=project.max_depth,
        allow=parse_lines(project.allow_patterns),
        deny=parse_lines(project.deny_patterns),
        origins=seeds,  # the seeds' own scope keeps to their ports; named hosts allow every port
    )
