"""What the hosts answered, recorded once for every stage: a 429/503 with Retry-After holds the host
back for every worker until then, one without slows it down adaptively, a normal answer lets the
slowdown fade, and a host that answered nothing counts a failure in a row."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from core.net.client import retry_after_value

from .codes import BACKOFF_CODES, BACKOFF_STATUSES  # noqa: F401 - BACKOFF_CODES: read here by its callers
from .politeness import host_back_off, hosts_answered, hosts_note_failures, hosts_throttle


@dataclass(frozen=True)
class HostAnswer:
    """One answer of a host: its HTTP status (None: no answer), its Retry-After header's value, and
    the block rule its body matched (core/blocks.py), if any: a block page slows the host like a 429."""

    host: str
    status: int | None
    retry_after: str = ""
    blocked: str = ""


def hosts_record_answers(
    answers: Iterable[HostAnswer], *, reachable: set[str] = frozenset(), unreachable: set[str] = frozenset()
) -> dict[str, datetime]:
    """Record what the hosts answered. `reachable`: hosts that answered at all (their failures in a
    row start again from none); `unreachable`: hosts none of whose requests got through (each counts
    a failure in a row). Returns {host: held until} for the hosts held back now."""
    until, throttled, normal = {}, {}, set()
    for answer in answers:
        backs_off = answer.status in BACKOFF_STATUSES
        seconds = retry_after_value(answer.retry_after) if backs_off else None
        if seconds:
            until[answer.host] = host_back_off(host=answer.host, seconds=seconds, status=answer.status)
        elif answer.blocked:
            throttled[answer.host] = f"a block page (rule '{answer.blocked}')"
        elif backs_off:
            throttled[answer.host] = f"HTTP {answer.status} without Retry-After"
        elif answer.status is not None and answer.status < 400:
            normal.add(answer.host)
    hosts_answered(reachable=reachable, unthrottled=normal - throttled.keys())
    hosts_note_failures(robots_unreadable=set(), unreachable=unreachable - reachable)
    return until | hosts_throttle(slowed=set(throttled), reasons=throttled)
