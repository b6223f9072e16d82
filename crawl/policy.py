"""Project policy the stages share: identity (user agent), reach (private addresses, scope), limits
and media rules. The fetch, extract and download stages and the console read them here."""

import time

from django.conf import settings

from core.canonical import Scope, host_of, parse_lines
from core.mediarules import MediaRules
from core.net.client import FetchLimits
from crawl.models import Project


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


_RULES: dict[int, tuple[float, MediaRules]] = {}


def project_media_rules(project: Project) -> MediaRules:
    """The project's media rules (cached briefly per process, like its scope)."""
    cached = _RULES.get(project.id)
    if cached and time.monotonic() - cached[0] < 30:
        return cached[1]
    rules = MediaRules.build(
        kinds=project.media_kinds.split(","),
        extensions=parse_lines(project.media_extensions),
        mime_types=parse_lines(project.media_mime_types),
        page_patterns=parse_lines(project.media_page_patterns),
        gallery_patterns=parse_lines(project.gallery_page_patterns),
        max_bytes=project.media_max_bytes or settings.CRAWL_MAX_MEDIA_BYTES,
        any_host=project.media_any_host,
    )
    _RULES[project.id] = (time.monotonic(), rules)
    return rules


_SCOPE_CACHE: dict[int, tuple[float, Scope]] = {}
SCOPE_CACHE_SECONDS = 30


def project_scope(project: Project) -> Scope:
    """The project's scope; domains default to the hosts of its seeds (cached briefly per process)."""
    cached = _SCOPE_CACHE.get(project.id)
    if cached and time.monotonic() - cached[0] < SCOPE_CACHE_SECONDS:
        return cached[1]
    named = parse_lines(project.allowed_domains)
    seeds = [] if named else list(project.seeds.values_list("url", flat=True))
    scope = Scope.build(
        domains=named or sorted({host_of(u) for u in seeds} - {""}),
        max_depth=project.max_depth,
        allow=parse_lines(project.allow_patterns),
        deny=parse_lines(project.deny_patterns),
        origins=seeds,  # the seeds' own scope keeps to their ports; named hosts allow every port
    )
    _SCOPE_CACHE[project.id] = (time.monotonic(), scope)
    return scope


def forget_scope(project_id: int) -> None:
    _SCOPE_CACHE.pop(project_id, None)
