"""python manage.py export PROJECT [--what pages|items|assets] [--format jsonl|csv|warc|tar|tar.gz|tar.bz2]
[--kind KIND] [--job ID] [--since TIME] [-o FILE]: write a project's rows, stored responses (WARC) or
stored files (tar)."""

import os
import sys

from django.core.management.base import BaseCommand, CommandError

from console.exports.rows import (
    FIELDS,
    TAR_MODES,
    ExportFilter,
    csv_columns,
    csv_rows,
    export_count,
    export_rows,
    parse_since,
    write_csv,
    write_jsonl,
    write_tar,
)
from console.exports.warc import stored_count, write_warc
from console.management.commands._progress import progress, tracked
from console.management.commands._project import project_arg

TEXT_FORMATS = ("jsonl", "csv")


class Command(BaseCommand):
    help = (
        "Export a project: pages, items or assets as JSON lines or CSV (to stdout or -o FILE); "
        "stored pages as a WARC 1.1 file (--format warc: gzip per record, to -o FILE or to stdout when it "
        "is not a terminal); assets as a tar archive of the stored files with a manifest (tar, tar.gz, "
        "tar.bz2; needs -o). Progress and the summary go to stderr."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug, name or id")
        parser.add_argument("--what", choices=sorted(FIELDS), default="pages", help="rows to export (default: pages)")
        parser.add_argument(
            "--format",
            choices=[*TEXT_FORMATS, "warc", *TAR_MODES],
            default="jsonl",
            help="jsonl (default), csv, warc (stored responses of pages), tar, tar.gz or tar.bz2 (assets)",
        )
        parser.add_argument("-o", "--output", help="file to write (default: standard output)")
        parser.add_argument(
            "--kind", help="only rows of this kind (items: page, rule:<name>, api, spider; pages: page, sitemap, feed)"
        )
        parser.add_argument("--job", type=int, help="only what this job produced (items: whose data it extracted)")
        parser.add_argument("--since", help="only rows changed since this time (ISO 8601, UTC unless a zone is given)")

    def handle(self, *args, **opts):
        project = project_arg(opts["project"])
        self.rows = _filter(opts)
        if self.rows != ExportFilter() and opts["format"] not in TEXT_FORMATS:
            raise CommandError("--kind, --job and --since filter the jsonl and csv exports")
        if opts["format"] in TAR_MODES:
            n = self._tar(project, opts)
        elif opts["format"] == "warc":
            n = self._warc(project, opts)
        else:
            n = self._text(project, opts)
        if n is not None:
            what = "stored pages" if opts["format"] == "warc" else opts["what"]
            where = f" to {opts['output']}" if opts["output"] else ""
            self.stderr.write(f"{project.slug}: exported {n} {what} as {opts['format']}{where}")

    def _tar(self, project, opts) -> int:
        if opts["what"] != "assets" or not opts["output"]:
            raise CommandError("tar formats export assets to a file: use --what assets -o FILE")
        return write_tar(project, opts["output"], opts["format"])

    def _warc(self, project, opts) -> int | None:
        if opts["what"] != "pages":
            raise CommandError("a WARC holds stored pages: drop --what or use --what pages")
        if not opts["output"] and sys.stdout.isatty():
            raise CommandError("a WARC is binary: give -o FILE or redirect standard output")
        out = _open(opts["output"], "wb") if opts["output"] else sys.stdout.buffer
        name = os.path.basename(opts["output"]) if opts["output"] else ""
        try:
            with progress("warc", stored_count(project)) as advance:
                return write_warc(project, out, filename=name, on_page=advance)
        except BrokenPipeError:  # the reader went away (export ... | head): stop quietly
            sys.stderr.close()
            return None
        finally:
            if out is not sys.stdout.buffer:
                out.close()

    def _text(self, project, opts) -> int | None:
        out = _open(opts["output"], "w") if opts["output"] else sys.stdout
        try:
            what, count = opts["what"], export_count(project, opts["what"], self.rows)
            if opts["format"] == "csv":
                columns = csv_columns(project, what, self.rows)
                return write_csv(tracked(csv_rows(project, what, self.rows), what, count), out, columns)
            return write_jsonl(tracked(export_rows(project, what, self.rows), what, count), out)
        except BrokenPipeError:  # the reader went away (export ... | head): stop quietly
            sys.stderr.close()
            return None
        finally:
            if out is not sys.stdout:
                out.close()


def _filter(opts) -> ExportFilter:
    try:
        since = parse_since(opts["since"]) if opts["since"] else None
    except ValueError as exc:
        raise CommandError(f"--since: {exc}") from None
    return ExportFilter(kind=opts["kind"] or None, job=opts["job"], since=since)


def _open(path: str, mode: str):
    try:
        return open(path, mode) if "b" in mode else open(path, mode, encoding="utf-8", newline="")
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc.strerror}") from None
