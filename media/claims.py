"""The download stage's claim, through the same host politeness as pages: the assets ready now,
fair between projects, each host's slots booked by hosts_grant (robots.txt Crawl-delay, min_delay,
per-host cap, the project's token bucket, blocked hosts, Retry-After and the 429 throttle). An
asset whose host has no free slot waits in its row until the slot comes (its due time), so no
process sleeps on a host; the next wake-up takes it. What the hosts answered goes back into their
politeness."""

import uuid
from collections import Counter
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from core.canonical import server_of
from core.net.client import retry_after_value
from crawl.frontier.assets import assets_claim, assets_ready, assets_send_alone, assets_wait, assets_wake_more
from crawl.models import MediaAsset, Project
from crawl.services.politeness import HostGrant, host_back_off, hosts_answered, hosts_grant, hosts_throttle
from media.downloaders.plain_http import Download

IDLE_RETRY_SECONDS = 1.0  # a host's connections are all in use: look again this soon


@dataclass
class DownloadSlot:
    """When one claimed asset may start: its host's grant and its place among the grant's slots."""

    grant: HostGrant
    index: int = 0

    @property
    def start_at(self) -> float:
        return self.grant.slot(self.index)


@dataclass
class DownloadClaim:
    token: uuid.UUID
    assets: list[MediaAsset] = field(default_factory=list)
    slots: dict[int, DownloadSlot] = field(default_factory=dict)


@transaction.atomic
def assets_claim_round(asset_ids: list[int], *, limit: int, worker: str = "") -> DownloadClaim:
    """One short transaction: the candidates (exactly `asset_ids`, the reaper's one at a time, or
    the assets ready now), their hosts' slots booked, the assets that may start now leased, and the
    others given their hosts' next free slots."""
    if asset_ids:  # another copy of the message may have taken them
        queued = MediaAsset.objects.filter(id__in=asset_ids, state=MediaAsset.State.QUEUED)
        candidates = list(queued.values_list("id", "project_id", "url"))
    else:
        candidates = assets_ready(limit=limit)
    claim = DownloadClaim(token=uuid.uuid4())
    if not candidates:
        return claim
    projects = Project.objects.in_bulk({project_id for _, project_id, _ in candidates})
    wanted = Counter((server_of(url), project_id) for _, project_id, url in candidates)
    grants = hosts_grant(wanted=wanted, projects=projects, token=claim.token, ahead=0.0)
    waits, taken = {}, Counter()
    for asset_id, project_id, url in candidates:
        key = (server_of(url), project_id)
        grant, index = grants[key], taken[key]
        taken[key] += 1
        if grant.refused or index < grant.granted:
            claim.slots[asset_id] = DownloadSlot(grant=grant, index=index)
        elif grant.later is not None:
            waits[asset_id] = grant.waits(index - grant.granted + 1)[-1]
    assets_wait(waits)
    if asset_ids:
        _send_later(set(asset_ids) & {c[0] for c in candidates} - claim.slots.keys(), waits)
    elif len(candidates) >= limit:
        assets_wake_more()
    _, claim.assets = assets_claim(list(claim.slots), worker=worker, token=claim.token)
    return claim


def _send_later(ids: set[int], waits: dict) -> None:
    now = timezone.now()
    seconds = {i: (waits[i] - now).total_seconds() if i in waits else 0.0 for i in ids}
    assets_send_alone({i: max(IDLE_RETRY_SECONDS, s) for i, s in seconds.items()})


def hosts_record_answers(results: list[Download]) -> None:
    """What the hosts answered: a 429/503 with Retry-After holds the host back until then (for
    pages too), one without slows it down adaptively, a normal answer lets the slowdown fade."""
    throttled, answered = set(), set()
    for result in results:
        host = server_of(result.url)
        seconds = retry_after_value(result.retry_after) if result.status_code in (429, 503) else None
        if seconds:
            host_back_off(host=host, seconds=seconds, status=result.status_code)
        elif result.status_code in (429, 503):
            throttled.add(host)
        elif result.status_code is not None and result.status_code < 400:
            answered.add(host)
    hosts_answered(reachable=set(), unthrottled=answered - throttled)
    hosts_throttle(slowed=throttled)
