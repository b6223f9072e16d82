"""Django's admin as an app whose admin modules are imported when the URLs load
(crawlproject/urls.py) or the system checks run, not at every start: Celery workers and management
commands (a crawl and its progress polls) import a quarter of a second less and never use them."""

from django.contrib.admin.apps import SimpleAdminConfig
from django.core import checks


class AdminOnDemandConfig(SimpleAdminConfig):
    def ready(self) -> None:
        from django.contrib.admin.checks import check_dependencies

        checks.register(check_dependencies, checks.Tags.admin)
        checks.register(admin_checked, checks.Tags.admin)


def admin_checked(app_configs=None, **kwargs):
    """Django's admin checks over the registrations the URLs would load (a no-op import once done)."""
    from django.contrib import admin
    from django.contrib.admin.checks import check_admin_app

    admin.autodiscover()
    return check_admin_app(app_configs, **kwargs)
