"""Who may see and do what with which project: the one place the API, the admin, the dashboard and
the feeds ask.

A user's role (console/access/roles.py: viewer, operator, admin) says what they may do; the project's owners
(ProjectAccess: users and groups) say which projects they may do it to. Superusers and holders of
console.view_all_projects see every project.
"""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Q, QuerySet

from console.access.roles import ADMIN, OPERATOR, VIEWER
from console.models import ProjectAccess
from crawl.hosts.credentials import holds_secrets
from crawl.models import Project

ALL_PROJECTS = "console.view_all_projects"
NETWORK = "console.change_network_settings"
SPIDER_CODE = "scrape.deploy_spider"  # deploying or editing a spider's code (admins by default)
# What each action needs, besides seeing the project.
PERMISSIONS = {
    "view": "crawl.view_project",
    "add": "crawl.add_project",
    "change": "crawl.change_project",
    "delete": "crawl.delete_project",
    "run": "console.run_project",
    "export": "console.export_results",
    "try": "console.try_url",
    "network": NETWORK,
    "add_seed": "crawl.add_seed",
    "code": SPIDER_CODE,
}
# Settings that reach into networks or run code: changing them needs NETWORK. Any field a later
# migration adds with "network" in its name (allowed networks) is one too.
_NETWORK_NAMES = ("allow_private", "proxy", "spider", "cookies", "keep_cookies", "request_headers")
NETWORK_FIELDS = tuple(f.name for f in Project._meta.concrete_fields if f.name in _NETWORK_NAMES or "network" in f.name)
# Sink kinds that connect to any address (redis) or import and run a class (python).
NETWORK_SINK_KINDS = ("redis", "python")


def sees_all(user) -> bool:
    return bool(user and user.is_active and (user.is_superuser or user.has_perm(ALL_PROJECTS)))


def _owned_ids(user) -> QuerySet:
    """Ids of the projects the user owns, alone or through a group (a subquery, never a list)."""
    owned = ProjectAccess.objects.filter(Q(user=user) | Q(group__user=user))
    return owned.values("project_id")


def projects_for(user) -> QuerySet:
    """The projects the user may see."""
    return scoped(Project.objects.all(), user, "pk")


def scoped(queryset: QuerySet, user, path: str = "project") -> QuerySet:
    """`queryset` narrowed to rows of the projects the user may see; `path` leads from its model to
    the project ("pk" for projects, "page__project" for page versions)."""
    if sees_all(user):
        return queryset
    if user is None or not user.is_authenticated or not user.is_active:
        return queryset.none()
    return queryset.filter(**{f"{path}__in": _owned_ids(user)})


def groups_for(user) -> QuerySet:
    """The groups the user may see and name as owners: their own teams (the role groups aside, which
    every team shares) and the groups that own a project they see. All of them for sees_all."""
    if sees_all(user):
        return Group.objects.all()
    if user is None or not user.is_authenticated or not user.is_active:
        return Group.objects.none()
    teams = Q(user=user) & ~Q(name__in=(VIEWER, OPERATOR, ADMIN))
    return Group.objects.filter(teams | Q(project_access__project__in=projects_for(user))).distinct()


def users_for(user) -> QuerySet:
    """The users the user may see and name as owners: themselves, the members of the groups of
    groups_for, and the owners of the projects they see. All of them for sees_all."""
    users = get_user_model().objects.all()
    if sees_all(user):
        return users
    if user is None or not user.is_authenticated or not user.is_active:
        return users.none()
    seen = Q(pk=user.pk) | Q(groups__in=groups_for(user)) | Q(project_access__project__in=projects_for(user))
    return users.filter(seen).distinct()


def sees(user, project: Project) -> bool:
    return sees_all(user) or projects_for(user).filter(pk=project.pk).exists()


def may(user, action: str, project: Project | None = None) -> bool:
    """Whether the user's role allows `action` (a key of PERMISSIONS), on `project` when one is given."""
    if user is None or not user.has_perm(PERMISSIONS[action]):
        return False
    return project is None or sees(user, project)


def project_owner_add(*, project: Project, user) -> None:
    """Make the user an owner of the project (its creator is one)."""
    if user is not None and user.is_authenticated:
        ProjectAccess.objects.get_or_create(project=project, user=user)


def network_changes(project: Project | None, data: dict) -> list[str]:
    """The network settings `data` would change on `project` (on a new project: from the defaults).
    On a project that holds secrets, its allowed domains are one: its cookies and headers go there."""
    current = project if project is not None else Project()
    names = (*NETWORK_FIELDS, *network_scope_fields(project))
    return [name for name in names if name in data and data[name] != getattr(current, name)]


def network_scope_fields(project: Project | None) -> tuple[str, ...]:
    return ("allowed_domains",) if project is not None and holds_secrets(project) else ()


def network_refusal(names: list[str]) -> str:
    fields = ", ".join(names)
    return f"Changing {fields} needs the {NETWORK} permission (the admin role): it reaches into networks or runs code."
