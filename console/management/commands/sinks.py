"""python manage.py sinks PROJECT [--add NAME --kind KIND --config JSON] [--remove NAME] [--retry NAME]:
a project's result sinks, what each delivered, owes and failed. Their configs are shown masked, as
the API and the admin show them (secrets are write-only)."""

import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from console.health.sink_status import sink_status
from console.management.commands._project import project_arg
from console.masking import masked_config
from sinks.delivery import sink_retry
from sinks.models import Sink


class Command(BaseCommand):
    help = "List, add, remove or retry a project's result sinks (file, redis, tar, jsonl, python)."

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug, name or id")
        parser.add_argument("--add", metavar="NAME", help="add a sink of this name (with --kind and --config)")
        parser.add_argument("--kind", choices=Sink.Kind.values, help="the new sink's kind")
        parser.add_argument("--config", default="{}", help="the new sink's settings, a JSON object")
        parser.add_argument("--pages", action="store_true", help="the new sink also receives page records")
        parser.add_argument("--assets", action="store_true", help="the new sink also receives asset records")
        parser.add_argument("--no-items", action="store_true", help="the new sink receives no items")
        parser.add_argument("--remove", metavar="NAME", help="remove this sink (its delivery records too)")
        parser.add_argument("--retry", metavar="NAME", help="deliver this sink's failed records again")

    def handle(self, *args, **opts):
        project = project_arg(opts["project"])
        if opts["add"]:
            self._add(project, opts)
        if opts["remove"]:
            deleted, _ = Sink.objects.filter(project=project, name=opts["remove"]).delete()
            if not deleted:
                raise CommandError(f"{project.slug} has no sink {opts['remove']!r}")
            self.stdout.write(f"sink {opts['remove']} removed")
        if opts["retry"]:
            sink = Sink.objects.filter(project=project, name=opts["retry"]).first()
            if sink is None:
                raise CommandError(f"{project.slug} has no sink {opts['retry']!r}")
            self.stdout.write(f"sink {sink.name}: {sink_retry(sink)} failed records queued again")
        for sink in Sink.objects.filter(project=project).order_by("name"):
            status = sink_status(sink)
            c = status["counts"]
            state = "" if sink.active else " (inactive)"
            self.stdout.write(
                f"{sink.name:20s} {sink.kind:7s} {c['done']} delivered, {c['pending'] + c['leased']} owed, "
                f"{c['failed']} failed{state}  {json.dumps(masked_config(sink.config))}"
            )
            if status["failing_since"] is not None:
                since = status["failing_since"].isoformat(timespec="seconds")
                self.stdout.write(f"{'':20s} failing since {since}: {status['last_error']}")

    def _add(self, project, opts) -> None:
        if not opts["kind"]:
            raise CommandError("--add needs --kind (file, redis, tar, jsonl, python or http)")
        try:
            config = json.loads(opts["config"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--config is not JSON: {exc}") from None
        sink = Sink(
            project=project,
            name=opts["add"],
            kind=opts["kind"],
            config=config,
            items=not opts["no_items"],
            pages=opts["pages"],
            assets=opts["assets"],
        )
        try:
            sink.full_clean()
        except ValidationError as exc:
            problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
            raise CommandError(f"sink refused: {problems}") from None
        sink.save()
        self.stdout.write(f"sink {sink.name} ({sink.kind}) added to {project.slug}")
