"""The download stage's claim, through the same host claim as pages: the assets ready now,
fair between projects, each host's slots booked by hosts_claim (robots.txt Crawl-delay, min_delay,
per-host cap, the project's token bucket, blocked hosts, Retry-After and the 429 throttle). An
asset whose host has no free slot waits in its row until the slot comes (its due time), so no
process sleeps on a host; the next wake-up takes it."""

import uuid
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from core.canonical import server_of
from crawl.frontier.assets import assets_claim, assets_ready, assets_send_alone, assets_wait, assets_wake_more
from crawl.hosts.claims import hosts_claim
from crawl.hosts.politeness import HostGrant
from crawl.models import MediaAsset


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
    the assets ready now), their hosts' slots booked (hosts_claim), the assets that may start now
    leased, and the others given their hosts' next free slots."""
    if asset_ids:  # another copy of the message may have taken them
        queued = MediaAsset.objects.filter(id__in=asset_ids, state=MediaAsset.State.QUEUED)
        candidates = list(queued.values_list("id", "project_id", "url"))
    else:
        candidates = assets_ready(limit=limit)
    hosts = hosts_claim([(asset_id, project_id, server_of(url)) for asset_id, project_id, url in candidates])
    claim = DownloadClaim(token=hosts.token)
    if not candidates:
        return claim
    claim.slots = {i: DownloadSlot(grant=grant, index=index) for i, (grant, index) in hosts.now.items()}
    assets_wait(hosts.waits)
    if asset_ids:
        later = set(asset_ids) & {c[0] for c in candidates} - claim.slots.keys()
        assets_send_alone(hosts.retry_in(later, since=timezone.now()))
    elif len(candidates) >= limit:
        assets_wake_more()
    _, claim.assets = assets_claim(list(claim.slots), worker=worker, token=claim.token)
    return claim
