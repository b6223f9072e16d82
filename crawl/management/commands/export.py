"""python manage.py export PROJECT [--what pages|items|assets] [--format jsonl|csv] [-o FILE]"""

import sys

from django.core.management.base import BaseCommand, CommandError

from crawl.exports import FIELDS, export_rows, write_csv, write_jsonl
from crawl.models import Project
from crawl.services.projects import project_by_ref


class Command(BaseCommand):
    help = "Export a project's pages, items or assets as JSON lines or CSV."

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug, name or id")
        parser.add_argument("--what", choices=sorted(FIELDS), default="pages")
        parser.add_argument("--format", choices=["jsonl", "csv"], default="jsonl")
        parser.add_argument("-o", "--output", help="file to write (default: standard output)")

    def handle(self, *args, **opts):
        try:
            project = project_by_ref(opts["project"])
        except Project.DoesNotExist as exc:
            raise CommandError(str(exc)) from None
        out = open(opts["output"], "w", encoding="utf-8", newline="") if opts["output"] else sys.stdout
        try:
            rows = export_rows(project, opts["what"])
            if opts["format"] == "csv":
                n = write_csv(rows, out, FIELDS[opts["what"]])
            else:
                n = write_jsonl(rows, out)
        except BrokenPipeError:  # the reader went away (export ... | head): stop quietly
            sys.stderr.close()
            return
        finally:
            if out is not sys.stdout:
                out.close()
        self.stderr.write(f"exported {n} {opts['what']} of {project.slug} as {opts['format']}")
