"""python manage.py debugger PROJECT [FILE] (--url URL | --stored N | --active): the spider
debugger from the command line. Runs a draft spider module, unsaved, on one request fetched through
the project's egress, or on its last N stored pages compared with the active version; the draft
runs in a child process under the CRAWL_DEBUG_* limits, as the console's debugger runs it."""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from console.debug_models import DebugRun
from console.debugger import debug_run_execute
from console.debugger_stored import active_source
from console.management.commands._project import project_arg
from scrape.spider_request import RequestError


class Command(BaseCommand):
    help = "Run a draft spider on one URL, or on the project's last stored pages, without deploying it."

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug, name or id")
        parser.add_argument("file", nargs="?", help="the draft spider module (default: the active version)")
        parser.add_argument("--url", help="fetch this URL through the project's egress and run the draft on it")
        parser.add_argument("--stored", type=int, metavar="N", help="run the draft on the last N stored pages")
        parser.add_argument("--active", action="store_true", help="print the active version's source and stop")

    def handle(self, *args, **options):
        project = project_arg(options["project"])
        if options["active"]:
            source = active_source(project)
            if source is None:
                raise CommandError(f"{project.slug} runs no deployed spider version")
            self.stdout.write(source, ending="")
            return
        if bool(options["url"]) == bool(options["stored"]):
            raise CommandError("give either --url URL or --stored N")
        source = Path(options["file"]).read_text() if options["file"] else (active_source(project) or "")
        run = self._run(project, source, options)
        debug_run_execute(run.id)
        run.refresh_from_db()
        self._print(run.report)
        if run.state != DebugRun.State.DONE or run.report.get("compile_error") or run.report.get("spider_error"):
            raise CommandError("the draft did not run cleanly")

    def _run(self, project, source: str, options) -> DebugRun:
        from console.debugger import request_checked

        try:
            asked = {"url": options["url"], **request_checked(options["url"], {})} if options["url"] else {}
        except RequestError as exc:
            raise CommandError(str(exc)) from None
        stored = min(options["stored"] or 0, 500) or 0
        mode = DebugRun.Mode.STORED if stored else DebugRun.Mode.REQUEST
        return DebugRun.objects.create(project=project, mode=mode, source=source, request=asked, stored_pages=stored)

    def _print(self, report: dict) -> None:
        for problem in ("stopped", "error", "spider_error"):
            if report.get(problem):
                self.stderr.write(report[problem])
        if report.get("compile_error"):
            error = report["compile_error"]
            self.stderr.write(f"line {error['line']}: {error['message']}" if error["line"] else error["message"])
        if report.get("mode") == "stored":
            self._print_stored(report)
        elif "status" in report:
            self._print_request(report)

    def _print_stored(self, report: dict) -> None:
        self.stdout.write(f"{report['pages']} stored pages")
        for f in report["fields"]:
            self.stdout.write(
                f"the draft fills {f['name']} on {f['draft']} of {f['pages']} pages, "
                f"{report['against']} on {f['active']} of {f['pages']}"
            )

    def _print_request(self, report: dict) -> None:
        self.stdout.write(f"{report['request'].get('method', 'GET')} {report['url']} -> {report['status']}")
        for n, item in enumerate(report.get("items", []), 1):
            self.stdout.write(f"item {n}: {json.dumps(item, ensure_ascii=False, sort_keys=True, default=str)}")
        for r in report.get("requests", []):
            self.stdout.write(f"request {r['request'].get('method', 'GET')} {r['url']}: {r['fate']}")
        for line in report.get("log", []):
            self.stdout.write(f"{line['level']} {line['message']}")
