"""Pages of hosts that went down: one of them carries each probe of its host, and the moment the
host answers again, all of them are due (their own retry back-off never keeps a live site
waiting). The host's side (down, held, probed) is crawl/hosts/politeness.py's."""

from django.db.models import Q
from django.utils import timezone

from crawl.models import Host, Page, Project

from .pages import QUEUED, pages_wake_when_due
from .recrawl import hub_filter

PROBE_LIMIT = 500  # down hosts given a probe per sweep


def never_given_up() -> Q:
    """The rows of crawl.frontier.pages.page_never_given_up: pages fetched before, and the hubs of
    projects that recrawl on a schedule."""
    scheduled = Q(project__recrawl_every_minutes__gt=0) | ~Q(project__recrawl_crontab="")
    return ~Q(content_sha256="") | (hub_filter() & scheduled)


def pages_host_back(*, hosts: list[str]) -> int:
    """The hosts answered again after being down: their pages waiting after a failure are due now,
    and the fetch stages are woken. Returns the pages made due."""
    now = timezone.now()
    waiting = Page.objects.filter(host__in=hosts, state=QUEUED, next_fetch_at__gt=now).exclude(error_code="")
    due = waiting.exclude(request__has_key="not_before").update(next_fetch_at=now, enqueued_at=now)
    if due:
        for render in (False, True):
            pages_wake_when_due(render=render, early=0.0, least=0.0)
    return due


def pages_probe_down_hosts() -> int:
    """Give each down host whose probe time has come a page to probe it with, when none of its
    pages is due: the one never given up (hubs, pages fetched before) that waits the least is due
    now. The claim that takes it sends it alone (the host's hold lets one request through). A
    one-off crawl's new pages carry no probe: they keep their own retries. Returns pages made due."""
    now = timezone.now()
    due_hosts = Host.objects.filter(down_since__isnull=False, probe_at__lte=now).order_by("probe_at")
    made = 0
    for host in due_hosts.values_list("host", flat=True)[:PROBE_LIMIT]:
        waiting = Page.objects.filter(host=host, state=QUEUED, suspect=False, project__status=Project.Status.ACTIVE)
        if waiting.filter(next_fetch_at__lte=now).exists():
            continue
        carrier = waiting.filter(never_given_up()).order_by("-priority", "next_fetch_at", "id").first()
        if carrier is not None:
            made += Page.objects.filter(id=carrier.id, state=QUEUED).update(next_fetch_at=now)
    return made
