"""The one claim a stage makes of its hosts: for the candidates the stage picked (pages, assets),
book their hosts' politeness slots and say which may start now and when each of the others may.
The stage leases its own rows with the claim's token; hosts_release(token) frees the capacity."""

import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from crawl.models import Project

from .politeness import SLOT_MARGIN, HostGrant, hosts_grant

IDLE_RETRY_SECONDS = 0.2  # a host's connections are all in use: look again this soon
# A request later than this past its slot is not sent (it waits for another): with the slots' margin
# this keeps two requests to a host at least the delay apart however late a batch runs. It is
# checked when the request's connection is ready to write (core.net.transport.send_deadline), so the
# rest of the margin only covers the moment from there to the wire.
LATE_SECONDS = SLOT_MARGIN * 0.8

Candidate = tuple[int, int, str]  # (row id, project id, host)


@dataclass
class HostsClaim:
    """What one claim may send: `now` (row id -> its grant and its place among the grant's slots:
    it starts now, or is refused when the grant says so) and `waits` (row id -> when its host can
    take it: the host's next free slots). Rows in neither wait for a host's connections."""

    token: uuid.UUID
    grants: dict[tuple[str, int], HostGrant] = field(default_factory=dict)
    now: dict[int, tuple[HostGrant, int]] = field(default_factory=dict)
    waits: dict[int, datetime] = field(default_factory=dict)

    def retry_in(self, ids: set[int], *, since: datetime) -> dict[int, float]:
        """Seconds from `since` until each of `ids` (rows the claim did not start) is worth claiming
        again: its host's slot, and at least IDLE_RETRY_SECONDS."""
        waits = {i: (self.waits[i] - since).total_seconds() if i in self.waits else 0.0 for i in ids}
        return {i: max(IDLE_RETRY_SECONDS, seconds) for i, seconds in waits.items()}


def hosts_claim(
    candidates: list[Candidate], *, ahead: float = 0.0, urgent: Callable[[list[int]], set[int]] | None = None
) -> HostsClaim:
    """Book the candidates' hosts' slots, in the caller's transaction: those that may start now (or
    within `ahead` seconds: a fetch session's requests wait for their slots on its event loop) are
    in `now`; the others get their hosts' next free slots in `waits`. `urgent` picks the waiting rows
    of higher priority: each takes its host's next free slot, ahead of the rows already waiting
    there (a row whose slot it takes is given the host's last one when both come due: the claim
    then takes the higher priority first); the others queue behind the rows already waiting."""
    claim = HostsClaim(token=uuid.uuid4())
    if not candidates:
        return claim
    projects = Project.objects.in_bulk({project_id for _, project_id, _ in candidates})
    wanted = Counter((host, project_id) for _, project_id, host in candidates)
    claim.grants = hosts_grant(wanted=wanted, projects=projects, token=claim.token, ahead=ahead)
    waiting, taken = [], Counter()
    for row_id, project_id, host in candidates:
        grant, index = claim.grants[(host, project_id)], taken[(host, project_id)]
        taken[(host, project_id)] += 1
        if grant.refused or index < grant.granted:
            claim.now[row_id] = (grant, index)
        elif grant.later is not None:
            waiting.append((row_id, grant))
    claim.waits = _wait_slots(waiting, urgent)
    return claim


def _wait_slots(waiting: list[tuple[int, HostGrant]], urgent: Callable | None) -> dict[int, datetime]:
    """When each row that waits for its host starts, in the order of `waiting`."""
    first = urgent([row_id for row_id, _ in waiting]) if urgent is not None and waiting else set()
    ahead, behind, starts = Counter(), Counter(), {}
    for row_id, grant in waiting:
        if row_id in first:
            starts[row_id] = grant.free_slot(ahead[grant.host])
            ahead[grant.host] += 1
        else:
            starts[row_id] = grant.waits(behind[grant.host] + 1)[-1]
            behind[grant.host] += 1
    return starts
