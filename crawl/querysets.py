"""Chainable frontier filters used by selectors and the admin (reads only: writes are the frontier's)."""

from django.db import models

from crawl.frontier.stages import PAGE_PENDING_STATES


class PageQuerySet(models.QuerySet):
    def pending(self):
        return self.filter(state__in=PAGE_PENDING_STATES)
