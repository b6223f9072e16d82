"""The three roles, as Django groups kept in step with this module after every migrate:

- viewer: reads everything of the projects they may see;
- operator: a viewer who also starts, pauses, resumes, cancels, retries, recrawls and exports, adds
  seeds, uses Try a URL on public addresses, tunes the monitors' thresholds and makes rules of their own;
- admin: every permission of the crawler's apps, network settings included.

Which projects a member sees is the projects' owners' business (console/access/policy.py); seeing every
project is console.view_all_projects, given on purpose (superusers have it). A role's permissions
are set, not added to: a custom set belongs in a group of its own.
"""

from django.apps import apps as global_apps
from django.contrib.auth.management import create_permissions
from django.contrib.auth.models import Group, Permission
from django.db import DEFAULT_DB_ALIAS

APPS = ("crawl", "scrape", "media", "sinks", "console")
VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
OPERATOR_EXTRA = (
    "console.run_project",
    "console.export_results",
    "console.try_url",
    "crawl.add_seed",
    "console.change_monitor",  # thresholds of the built-in monitors
    "console.add_monitor",  # rules of their own
    "console.delete_monitor",
)
NOT_IN_ROLES = ("console.view_all_projects",)


def role_permissions(using: str = DEFAULT_DB_ALIAS) -> dict[str, list[Permission]]:
    """Each role's permissions, read from the database (they exist once the apps are migrated)."""
    perms = Permission.objects.using(using).filter(content_type__app_label__in=APPS).select_related("content_type")
    by_name = {f"{p.content_type.app_label}.{p.codename}": p for p in perms}
    for name in NOT_IN_ROLES:
        by_name.pop(name, None)
    viewer = [p for p in by_name.values() if p.codename.startswith("view_")]
    operator = viewer + [by_name[name] for name in OPERATOR_EXTRA if name in by_name]
    return {VIEWER: viewer, OPERATOR: operator, ADMIN: list(by_name.values())}


def roles_install(sender=None, using: str = DEFAULT_DB_ALIAS, **kwargs) -> None:
    """post_migrate: create the role groups and set their permissions (idempotent)."""
    for label in APPS:
        create_permissions(global_apps.get_app_config(label), verbosity=0, using=using)
    for name, perms in role_permissions(using).items():
        group, _ = Group.objects.using(using).get_or_create(name=name)
        group.permissions.set(perms)
