"""Chainable frontier filters used by services, selectors and the admin."""

from django.db import models
from django.db.models import Q
from django.utils import timezone

PENDING_STATES = ("queued", "leased", "fetched", "extracted")


class PageQuerySet(models.QuerySet):
    def pending(self):
        return self.filter(state__in=PENDING_STATES)

    def claimable_for_fetch(self, now=None):
        now = now or timezone.now()
        free = Q(state="queued") | Q(state="leased", lease_expires_at__lt=now)
        return self.filter(free, next_fetch_at__lte=now)

    def claimable_for_extract(self, now=None):
        now = now or timezone.now()
        return self.filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now), state="fetched")
