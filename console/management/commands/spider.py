"""python manage.py spider check PROJECT [--draft FILE] [--checks DIR] | spider checks-export PROJECT DIR"""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from console.management.commands._project import project_arg
from scrape.models import SpiderCheck
from scrape.spider_checks import check_run, checks_from_dir
from scrape.spider_code import SpiderCodeError, compile_spider
from scrape.spider_versions import check_to_file, project_spider, spider_checks_run
from scrape.spiders import SpiderError


class Command(BaseCommand):
    help = (
        "check: run the project's spider (its active version, or a draft file) against its checks, offline; "
        "exits 1 on any difference. checks-export: write the project's checks as JSON files, to keep in a repository."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        check = sub.add_parser("check", help="run the checks")
        check.add_argument("project", help="project slug, name or id")
        check.add_argument("--draft", metavar="FILE", help="run this spider module instead of the active version")
        check.add_argument("--checks", metavar="DIR", help="run the checks kept as JSON files in DIR instead")
        export = sub.add_parser("checks-export", help="write the project's checks as JSON files")
        export.add_argument("project", help="project slug, name or id")
        export.add_argument("dir", help="folder to write <name>.json files into")

    def handle(self, *args, **opts):
        project = project_arg(opts["project"])
        if opts["action"] == "checks-export":
            return self._export(project, Path(opts["dir"]))
        spider = self._spider(project, opts["draft"])
        if opts["checks"]:
            results = [check_run(spider, check) for check in checks_from_dir(Path(opts["checks"]))]
        else:
            results = spider_checks_run(project=project, spider=spider)
        for result in results:
            self.stdout.write(f"{'ok  ' if result.passed else 'FAIL'} {result.name}")
            for difference in result.differences:
                self.stdout.write(f"       {difference}")
        failed = sum(not r.passed for r in results)
        summary = f"{project.slug}: {len(results) - failed} of {len(results)} checks pass"
        if failed:
            raise CommandError(summary)
        self.stdout.write(summary)

    def _spider(self, project, draft: str | None):
        try:
            if draft:
                return compile_spider(Path(draft).read_text(), filename=draft)()
            return project_spider(project)
        except SpiderCodeError as exc:
            raise CommandError(f"{draft or 'the active version'}: {exc}") from None
        except (SpiderError, OSError) as exc:
            raise CommandError(str(exc)) from None

    def _export(self, project, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        checks = SpiderCheck.objects.filter(project=project).order_by("name")
        for check in checks:
            (folder / f"{check.name}.json").write_text(json.dumps(check_to_file(check), indent=1, ensure_ascii=False))
        self.stdout.write(f"{project.slug}: {len(checks)} checks written to {folder}")
