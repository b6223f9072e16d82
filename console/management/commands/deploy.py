"""python manage.py deploy PROJECT FILE [-m MESSAGE] [--force] | deploy PROJECT --activate N | deploy PROJECT --list"""

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from console.management.commands._project import project_arg
from scrape.models import SpiderVersion
from scrape.spider_code import SpiderCodeError
from scrape.spider_versions import DeployRefused, spider_version_activate, spider_version_deploy


class Command(BaseCommand):
    help = (
        "Deploy a spider module as the project's next version and activate it (workers use it from their next "
        "batch), activate an older version (a rollback), or list the versions."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug, name or id")
        parser.add_argument("file", nargs="?", help="the spider module to deploy (- reads standard input)")
        parser.add_argument("-m", "--message", default="", help="what this version changes")
        parser.add_argument("--force", action="store_true", help="deploy even if the project's checks fail")
        parser.add_argument("--activate", type=int, metavar="N", help="activate version N instead (roll back)")
        parser.add_argument("--list", action="store_true", help="list the project's versions")

    def handle(self, *args, **opts):
        project = project_arg(opts["project"])
        if opts["list"]:
            return self._list(project)
        if opts["activate"] is not None:
            return self._activate(project, opts["activate"])
        if not opts["file"]:
            raise CommandError("name the spider module to deploy, or --activate N, or --list")
        source = self._read(opts["file"])
        try:
            version = spider_version_deploy(
                project=project, source=source, message=opts["message"], force=opts["force"]
            )
        except DeployRefused as exc:
            details = "".join(f"\n  {line}" for line in exc.differences)
            raise CommandError(
                f"deploy refused, nothing saved: {exc.reason}{details}\n(--force deploys anyway)"
            ) from None
        except SpiderCodeError as exc:
            raise CommandError(f"deploy refused, nothing saved: {opts['file']}: {exc}") from None
        self.stdout.write(f"{project.slug}: spider version {version.number} ({version.sha256[:12]}) is active")

    def _read(self, name: str) -> str:
        if name == "-":
            return sys.stdin.read()
        try:
            return Path(name).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {name}: {exc}") from None

    def _activate(self, project, number: int) -> None:
        version = SpiderVersion.objects.filter(project=project, number=number).first()
        if version is None:
            raise CommandError(f"{project.slug} has no spider version {number}")
        spider_version_activate(project=project, version=version)
        self.stdout.write(f"{project.slug}: spider version {number} is active")

    def _list(self, project) -> None:
        for version in SpiderVersion.objects.filter(project=project).order_by("number"):
            mark = "*" if version.id == project.spider_version_id else " "
            when = f"{version.created_at:%Y-%m-%d %H:%M}"
            line = f"{mark} v{version.number}  {version.sha256[:12]}  {when}  {version.message}"
            self.stdout.write(line.rstrip())
