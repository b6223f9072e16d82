"""python manage.py requeue PROJECT [--failed | --state done|failed] [--error-code CODE] [--host HOST]
[--url-regex R]: fetch chosen finished or failed pages again."""

import re

from django.core.management.base import BaseCommand, CommandError

from console.management.commands._project import project_arg
from console.runs.control import pages_requeue, pages_retry
from crawl.models import Page, Project


class Command(BaseCommand):
    help = (
        "Queue a project's pages for fetching again, now: --failed (the default) retries failed pages with "
        "fresh attempts; --state done refetches finished pages (conditional GET where validators are "
        "stored). Narrow with --error-code, --host and --url-regex. Pending pages are left alone."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug, name or id")
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--failed", action="store_true", help="failed pages (the default)")
        which.add_argument(
            "--state", choices=[Page.State.DONE, Page.State.FAILED], help="pages in this state (done or failed)"
        )
        parser.add_argument("--error-code", help="only pages that failed with this code, e.g. http_500")
        parser.add_argument("--host", help="only pages of this server: its host, with :port when not the default")
        parser.add_argument("--url-regex", metavar="REGEX", help="only pages whose URL matches (database regex)")

    def handle(self, *args, **opts):
        project = project_arg(opts["project"])
        state = opts["state"] or Page.State.FAILED
        pages = self._chosen(project, state, opts)
        if state == Page.State.FAILED:
            count = pages_retry(pages=pages)
        else:
            count = pages_requeue(pages=pages)
        later = "" if project.status == Project.Status.ACTIVE else " (the project is paused: they run on resume)"
        self.stdout.write(f"{project.slug}: requeued {count} {state} pages{later}")

    def _chosen(self, project: Project, state: str, opts: dict):
        pages = Page.objects.filter(project=project, state=state)
        if opts["error_code"]:
            pages = pages.filter(error_code=opts["error_code"])
        if opts["host"]:
            pages = pages.filter(host=opts["host"].lower())
        if opts["url_regex"]:
            try:
                re.compile(opts["url_regex"])
            except re.error as exc:
                raise CommandError(f"bad --url-regex {opts['url_regex']!r}: {exc}") from None
            pages = pages.filter(url__regex=opts["url_regex"])
        return pages
