"""python manage.py addseeds PROJECT [URL ...] [--file FILE] [--kind page|sitemap|feed]: add start URLs."""

import sys

from django.core.management.base import BaseCommand, CommandError

from console.management.commands._progress import tracked
from console.management.commands._project import project_arg
from console.models import Job
from console.runs.steering import seeds_add_as_job
from crawl.models import Project, Seed
from crawl.services.projects import seed_problem


class Command(BaseCommand):
    help = (
        "Add seeds to a project and queue them for fetching (crawled now as a job when the project is "
        "active: its running job, else a new one; else when it resumes or starts). Each URL is checked first "
        "(a crawlable URL, a host with a public address unless the project allows private ones); "
        "refused URLs are reported with the reason and not added. "
        "Fails when every URL is refused."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug, name or id")
        parser.add_argument("urls", nargs="*", metavar="URL", help="seed URLs")
        parser.add_argument(
            "--file", help="read more URLs from FILE, one per line ('-': standard input; blank lines and # skipped)"
        )
        parser.add_argument(
            "--kind", choices=Seed.Kind.values, default=Seed.Kind.PAGE, help="what the URLs serve (default: page)"
        )

    def handle(self, *args, **opts):
        project = project_arg(opts["project"])
        urls = opts["urls"] + (_read_urls(opts["file"]) if opts["file"] else [])
        if not urls:
            raise CommandError("give at least one URL or --file FILE")
        accepted = self._checked(project, urls)
        if not accepted:
            raise CommandError(f"all {len(urls)} seeds refused; nothing added")
        before = project.seeds.count()
        job, new_ids = seeds_add_as_job(project=project, urls=accepted, kind=opts["kind"], trigger=Job.Trigger.COMMAND)
        added, refused = project.seeds.count() - before, len(urls) - len(accepted)
        crawled = f", crawled as job {job.id}" if job is not None and new_ids else ""
        self.stdout.write(
            f"{project.slug}: added {added} seeds ({len(new_ids)} new frontier rows{crawled}), refused {refused}"
        )

    def _checked(self, project: Project, urls: list[str]) -> list[str]:
        """The URLs seed_problem accepts; each refused one is reported on stderr with its reason."""
        accepted = []
        for url in tracked(urls, "checking seeds", len(urls)):
            problem = seed_problem(url, allow_private=project.allow_private)
            if problem:
                self.stderr.write(f"refused seed {url}: {problem}")
            else:
                accepted.append(url)
        return accepted


def _read_urls(path: str) -> list[str]:
    if path == "-":
        return _urls_in(sys.stdin)
    try:
        with open(path, encoding="utf-8") as handle:
            return _urls_in(handle)
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None


def _urls_in(lines) -> list[str]:
    stripped = (line.strip() for line in lines)
    return [line for line in stripped if line and not line.startswith("#")]
