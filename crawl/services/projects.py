"""Project and seed writes used by commands, the admin and (later) the API."""

import logging
import socket
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils.text import slugify

from core.canonical import InvalidURL, canonicalize, host_in_domains, host_of, url_key
from core.net.guard import BlockedAddress, check_addresses, getaddrinfo
from crawl.frontier.discovery import seeds_enqueue
from crawl.frontier.pages import pages_requeue
from crawl.models import Page, Project, Seed
from crawl.policy import project_config_changed, project_scope

log = logging.getLogger("crawlhub.projects")


def project_get_or_create(*, name: str, **settings_) -> Project:
    """The project called `name`, or the one whose slug the name makes (the same name but for case
    and punctuation: one project, never a silent "-2"), created if neither exists; given settings
    overwrite the stored ones."""
    project = project_named_alike(name)
    if project is None:
        project, _ = Project.objects.get_or_create(name=name, defaults={"slug": _free_slug(name)})
    changed = {k: v for k, v in settings_.items() if v is not None and getattr(project, k) != v}
    if changed:
        for field, value in changed.items():
            setattr(project, field, value)
        project.save(update_fields=list(changed))
    return project


def project_name_for(url: str) -> str | None:
    """A project's default name for a start URL: its host, and its port when not the scheme's
    default (two local servers are two sites). None when the URL cannot be crawled."""
    try:
        parts = urlsplit(canonicalize(url))
    except (InvalidURL, ValueError):
        return None
    if not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{parts.port}" if parts.port else host


def project_named_alike(name: str, among: QuerySet | None = None) -> Project | None:
    """The project called `name`, else the one whose slug `name` would make: "My Shop" and
    "my shop!" are one project. `among`: only those projects (the ones a user sees)."""
    projects = Project.objects.all() if among is None else among
    slug = _slug_of(name)
    return projects.filter(name=name).order_by("id").first() or (projects.filter(slug=slug).first() if slug else None)


def project_create(*, name: str, slug: str = "", **settings_) -> Project:
    """A new project called `name`, at `slug` (default: made from the name) or, when another
    project holds that slug, at the first free one after it ("news-2")."""
    return Project.objects.create(name=name, slug=slug_free(slug or _slug_of(name) or "project"), **settings_)


def slug_free(slug: str) -> str:
    """`slug` when no project holds it, else the first of slug-2, slug-3... that is free."""
    base, candidate, n = slug[:190], slug, 1
    while Project.objects.filter(slug=candidate).exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def _slug_of(name: str) -> str:
    return slugify(name.replace(":", "-"))[:180]


def _free_slug(name: str) -> str:
    return slug_free(_slug_of(name) or "project")  # a name with no letter or digit to make a slug of: numbered


def project_by_ref(ref: str) -> Project:
    """A project by slug, name or id; raises Project.DoesNotExist with the reference in the message."""
    for lookup in ({"slug": ref}, {"name": ref}, {"id": int(ref)} if ref.isascii() and ref.isdigit() else None):
        if lookup:
            project = Project.objects.filter(**lookup).first()
            if project:
                return project
    raise Project.DoesNotExist(f"no project {ref!r}")


@transaction.atomic
def seeds_add(*, project: Project, urls: list[str], kind: str = Seed.Kind.PAGE) -> list[int]:
    """Add seeds (existing ones are kept) and queue them; returns the ids of new frontier rows."""
    Seed.objects.bulk_create([Seed(project=project, url=u.strip(), kind=kind) for u in urls], ignore_conflicts=True)
    project_config_changed(project)
    return seeds_enqueue(project)


@transaction.atomic
def seeds_retry_failed(*, project: Project, urls: list[str]) -> list[int]:
    """Give another chance to the failed seed rows among `urls`, and to every page refused for its
    private address once the project allows private ones: a crawl run again (with the flag the
    refusal named, or once the site is back up) tries them again instead of finding nothing owed.
    Returns the ids queued (published after the commit)."""
    keys = []
    for url in urls:
        try:
            keys.append(url_key(canonicalize(url)))
        except InvalidURL:
            continue  # still not a URL: refused up front again
    again = Q(is_seed=True, url_key__in=keys)
    if project.allow_private or settings.CRAWL_ALLOW_PRIVATE:
        again |= Q(error_code="blocked_address")
    failed = Page.objects.filter(again, project=project, state=Page.State.FAILED)
    return pages_requeue(failed, from_states=(Page.State.FAILED,))


_OFFERED: set[tuple[int, str]] = set()


def sitemaps_offer(*, project: Project, urls: list[str]) -> list[int]:
    """Sitemaps named by robots.txt become sitemap seeds: active (and queued) when the project
    follows sitemaps, else inactive, offered for an operator to switch on. Once per process.

    What a site says is kept only as a crawlable URL (canonical, http or https, length-capped) on
    the project's own sites, so it never widens the scope nor takes the project's secrets elsewhere;
    and a project keeps at most CRAWL_MAX_ROBOTS_SITEMAPS of them (marked `from_robots`)."""
    fresh = [u for u in urls if (project.id, u) not in _OFFERED]
    if not fresh:
        return []
    _OFFERED.update((project.id, u) for u in fresh)
    kept = _on_own_sites(project, fresh)[: _sitemap_room(project)]
    if len(kept) < len(fresh):
        log.info("robots.txt named %d sitemaps; %d kept", len(fresh), len(kept), extra={"project_id": project.id})
    if not kept:
        return []
    active = project.follow_sitemaps
    seeds = [Seed(project=project, url=u, kind=Seed.Kind.SITEMAP, active=active, from_robots=True) for u in kept]
    Seed.objects.bulk_create(seeds, ignore_conflicts=True)
    return seeds_enqueue(project) if project.follow_sitemaps else []


def _on_own_sites(project: Project, urls: list[str]) -> list[str]:
    """The canonical forms of the crawlable urls whose host is in the project's scope, in order, once each."""
    domains = project_scope(project).domains
    kept: dict[str, None] = {}
    for url in urls:
        try:
            canonical = canonicalize(url)
        except InvalidURL:
            continue
        if domains and host_in_domains(host_of(canonical), domains):
            kept[canonical] = None
    return list(kept)


def _sitemap_room(project: Project) -> int:
    return max(0, settings.CRAWL_MAX_ROBOTS_SITEMAPS - project.seeds.filter(from_robots=True).count())


def seed_problem(url: str, *, allow_private: bool) -> str | None:
    """Why a seed would be refused (not a crawlable URL, or a host that resolves to a refused
    address), or None. The same rules the fetcher applies, checked when the seed is added."""
    try:
        canonical = canonicalize(url)
    except InvalidURL as exc:
        return f"{exc.code}: {exc}"
    parts = urlsplit(canonical)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = getaddrinfo(parts.hostname or "", port)
    except (socket.gaierror, UnicodeError):
        return None  # unresolvable now: the fetch records dns_error, and may succeed later
    private = allow_private or settings.CRAWL_ALLOW_PRIVATE
    try:
        check_addresses(host_of(canonical), port, addresses, allow_private=private)
    except BlockedAddress as exc:
        return f"blocked_address: {exc}"
    return None
