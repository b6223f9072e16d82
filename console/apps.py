"""App config for the console: the operator layer above the pipeline (jobs, admin, dashboard, REST
API, exports, WARC, metrics, control actions, roles and project access). It reads crawl, scrape and
media; none of them imports it."""

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Console"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_login_failed

        from console.access.roles import roles_install
        from console.health import counters  # noqa: F401 - health counts
        from console.login_throttle import login_failed
        from console.runs import signals  # noqa: F401 - jobs follow their tasks, workers report their queues

        user_login_failed.connect(login_failed, dispatch_uid="console.login_failed")
        post_migrate.connect(roles_install, sender=self, dispatch_uid="console.roles_install")
