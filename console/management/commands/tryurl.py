"""python manage.py tryurl URL [--project NAME] [--allow-private] [--json]: the extraction debugger."""

import json

from django.core.management.base import BaseCommand, CommandError

from console.management.commands._project import project_arg
from console.tryurl import fate_groups, trial_report, try_url


class Command(BaseCommand):
    help = (
        "Fetch one URL as the project's crawl would and show headers, robots.txt's decision, extracted fields, "
        "items, every link with its fate (followed, or why not) and media found. Nothing is stored."
    )

    def add_arguments(self, parser):
        parser.add_argument("url", help="the page to fetch and extract")
        parser.add_argument("--project", help="use this project's rules, spider, API mode and request settings")
        parser.add_argument("--allow-private", action="store_true", help="allow loopback and private addresses")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args, **opts):
        project = None
        if opts["project"]:
            project = project_arg(opts["project"])
        report = trial_report(try_url(opts["url"], project=project, allow_private=opts["allow_private"]))
        if opts["json"]:
            self.stdout.write(json.dumps(report, default=str, ensure_ascii=False, indent=2))
        else:
            self._print(report)
        if report["error"]:
            raise CommandError(report["error"])

    def _print(self, report: dict) -> None:
        out = self.stdout.write
        out(f"URL      {report['url']}\nstatus   {report['status']}\nrobots   {report['robots']}")
        if report["fetch"]:
            out(f"fetch    {_fetch_line(report['fetch'])}")
        for name, value in report["headers"].items():
            out(f"  {name}: {value}")
        for section in ("page", "fields"):
            if section in report:
                out(f"\n[{section}]")
                for key, value in report[section].items():
                    out(f"  {key}: {json.dumps(value, ensure_ascii=False, default=str)[:500]}")
        for item in report.get("items", []):
            out(f"\n[item {item['kind']} #{item['position']}] {json.dumps(item['data'], ensure_ascii=False)[:1500]}")
            for error in item["errors"]:
                out(f"  error: {error}")
        if report.get("handler_log"):
            out("\n[handler log]")
            for line in report["handler_log"]:
                out(f"  {line['level']}: {line['message']}")
        if "link_fates" in report:
            self._print_links(report)
        out(f"\n[media: {len(report.get('media', []))}]")
        for media in report.get("media", []):
            out(f"  {media['kind']:6} {media['url']}")
        out("\nnothing was stored but robots.txt answers, in the crawl's cache")

    def _print_links(self, report: dict) -> None:
        """Every link under its fate, with the reason, as the admin page groups them."""
        out = self.stdout.write
        out(f"\n[links to follow: {len(report['links'])} of {len(report['link_fates'])}]")
        for group in fate_groups(report["link_fates"]):
            out(f"  {group['fate']} ({group['count']})")
            for link in group["links"]:
                out(f"    {link['url']}" + (f"  ({link['reason']})" if link["reason"] else ""))


def _fetch_line(fetch: dict) -> str:
    """How the page was fetched, in words: "POST with a 9-byte body, the request of its seed; depth 0, page"."""
    how = "headless Chromium (GET)" if fetch["rendered"] else fetch["method"]
    how += f" with a {fetch['body_bytes']}-byte body" if fetch.get("body_bytes") else ""
    how += f", the request of its {fetch['request_from']}" if fetch["request_from"] else ""
    return f"{how}; depth {fetch['depth']}, {fetch['kind']}"
