"""python manage.py export PROJECT [--what pages|items|assets] [--format jsonl|csv|tar|tar.gz|tar.bz2] [-o FILE]"""

import sys

from django.core.management.base import BaseCommand, CommandError

from crawl.exports import FIELDS, TAR_MODES, export_rows, write_csv, write_jsonl, write_tar
from crawl.management.commands._project import project_arg


class Command(BaseCommand):
    help = (
        "Export a project's pages, items or assets as JSON lines or CSV; assets also as a tar archive "
        "of the stored files with a manifest (tar, tar.gz, tar.bz2; needs -o)."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug, name or id")
        parser.add_argument("--what", choices=sorted(FIELDS), default="pages")
        parser.add_argument("--format", choices=["jsonl", "csv", *TAR_MODES], default="jsonl")
        parser.add_argument("-o", "--output", help="file to write (default: standard output)")

    def handle(self, *args, **opts):
        project = project_arg(opts["project"])
        if opts["format"] in TAR_MODES:
            n = self._tar(project, opts)
        else:
            n = self._text(project, opts)
        if n is not None:
            self.stderr.write(f"exported {n} {opts['what']} of {project.slug} as {opts['format']}")

    def _tar(self, project, opts) -> int:
        if opts["what"] != "assets" or not opts["output"]:
            raise CommandError("tar formats export assets to a file: use --what assets -o FILE")
        return write_tar(project, opts["output"], opts["format"])

    def _text(self, project, opts) -> int | None:
        out = open(opts["output"], "w", encoding="utf-8", newline="") if opts["output"] else sys.stdout
        try:
            rows = export_rows(project, opts["what"])
            if opts["format"] == "csv":
                return write_csv(rows, out, FIELDS[opts["what"]])
            return write_jsonl(rows, out)
        except BrokenPipeError:  # the reader went away (export ... | head): stop quietly
            sys.stderr.close()
            return None
        finally:
            if out is not sys.stdout:
                out.close()
