"""The project a command names (shared by export, recrawl, reextract and tryurl)."""

from django.core.management.base import CommandError

from crawl.models import Project
from crawl.services.projects import project_by_ref


def project_arg(ref: str) -> Project:
    """The project by slug, name or id, or a CommandError saying none matched."""
    try:
        return project_by_ref(ref)
    except Project.DoesNotExist as exc:
        raise CommandError(str(exc)) from None
